// infer/draft_proposer.cpp — see infer/draft_proposer.h.
#include "graphed/infer/draft_proposer.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <utility>

#include "graphed/runtime/device.h"
#include "graphed/util/error.h"

namespace graphed::infer {

ServingOptions draft_engine_options(const ServingOptions& target, int64_t vocabulary, int64_t draft_context) {
  ServingOptions options = target;
  // Positions per request: the target's, where the draft's context holds them; longer requests propose from their
  // latest tokens.
  options.max_sequence = target.max_sequence > 0 ? std::min(target.max_sequence, draft_context) : draft_context;
  options.block_size = std::min(target.block_size, DraftModelProposer::kBlockSize);
  options.buffer_size_gb = 0;
  options.cache_blocks = std::numeric_limits<int64_t>::max();  // every request's whole context (capped in the engine)
  options.chunked_prefill = true;  // a request's first proposal computes its whole prompt in the draft
  options.prefix_sharing = true;
  options.async_scheduling = true;
  options.vocabulary = vocabulary;
  options.prompt_vocabulary = 0;  // any id the draft embeds: the target's prompts may hold ids it never draws
  options.speculation = SpeculativeDecoding{};
  return options;
}

DraftModelProposer::DraftModelProposer(model::GptModel draft, const at::Device& device, const ServingOptions& target,
                                       int64_t vocabulary) {
  const config::ModelConfig& config = draft->config();
  GRAPHED_INTERNAL_ASSERT(vocabulary > 0, "a draft proposing for a vocabulary of ", vocabulary, " ids");
  GRAPHED_CHECK(config.vocab_size >= vocabulary, ConfigError, "the draft model's vocabulary has ", config.vocab_size,
                " tokens, fewer than the ", vocabulary,
                " the target draws from; fix: give a draft trained with the target's tokenizer");
  GRAPHED_CHECK(!config.has_mamba_layers(), ConfigError,
                "the draft model has Mamba layers, and a draft reuses its earlier proposals' cache blocks, which "
                "needs attention layers only; fix: give a transformer draft");
  const int64_t context = std::max(config.seq_length, config.max_position_embeddings.value_or(config.seq_length));
  ServingOptions options = draft_engine_options(target, vocabulary, context);
  // On a GPU the draft's cache takes at most a share of the free memory: the target's cache is sized after it.
  if (const auto free = runtime::available_memory_bytes(device)) {
    options.cache_blocks = 0;
    options.buffer_size_gb = kMemoryShare * static_cast<double>(*free) / (1024.0 * 1024.0 * 1024.0);
  }
  engine_ = std::make_unique<ServingEngine>(std::move(draft), device, options);
  engine_->capture_graphs();
}

std::vector<std::vector<int64_t>> DraftModelProposer::propose(const std::vector<Ask>& asks) {
  const auto start = std::chrono::steady_clock::now();
  const EngineStats before = engine_->stats();
  std::vector<std::vector<int64_t>> proposals(asks.size());
  std::map<int64_t, std::size_t> ask_of;  // draft request id -> ask
  const int64_t block = engine_->options().block_size;
  for (std::size_t i = 0; i < asks.size(); ++i) {
    const auto length = static_cast<int64_t>(asks[i].request->tokens.size());
    // A request longer than the draft's context proposes from its latest tokens, from a block boundary, so that the
    // next proposal still finds its blocks.
    const int64_t excess = length + asks[i].limit - engine_->max_sequence();
    const int64_t skipped = excess > 0 ? (excess + block - 1) / block * block : 0;
    if (asks[i].limit <= 0 || skipped >= length) continue;
    const auto first = asks[i].request->tokens.begin() + static_cast<std::ptrdiff_t>(skipped);
    RequestOptions options;
    options.max_new_tokens = asks[i].limit;
    ask_of[engine_->add_request({first, asks[i].request->tokens.end()}, std::move(options))] = i;
  }
  try {
    while (engine_->has_work()) {
      for (const TokenEvent& event : engine_->step().tokens) {
        if (const auto found = ask_of.find(event.request); found != ask_of.end()) {
          proposals[found->second].push_back(event.token);
        }
      }
    }
  } catch (...) {  // none of this round's requests stays in the draft engine for the next
    for (const auto& [id, ask] : ask_of) engine_->cancel(id);
    throw;
  }
  const EngineStats& after = engine_->stats();
  ++work_.rounds;
  work_.steps += after.steps - before.steps;
  work_.eager_steps += after.eager_steps - before.eager_steps;
  work_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return proposals;
}

ProposerWork DraftModelProposer::work() const { return work_; }

}  // namespace graphed::infer
