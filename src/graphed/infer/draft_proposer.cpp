// infer/draft_proposer.cpp — see infer/draft_proposer.h.
#include "graphed/infer/draft_proposer.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <utility>

#include "graphed/util/error.h"

namespace graphed::infer {

ServingOptions draft_engine_options(const ServingOptions& target, int64_t vocabulary) {
  ServingOptions options = target;
  options.max_sequence = 0;  // the draft's own context; longer requests propose from their latest tokens
  options.block_size = std::min(target.block_size, DraftModelProposer::kBlockSize);
  options.buffer_size_gb = 0;
  options.cache_blocks = std::numeric_limits<int64_t>::max();  // every request's whole context: a small model's
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
  GRAPHED_CHECK(config.vocab_size >= vocabulary, ConfigError, "the draft model's vocabulary has ", config.vocab_size,
                " tokens, fewer than the ", vocabulary,
                " the target draws from; fix: give a draft trained with the target's tokenizer");
  GRAPHED_CHECK(!config.has_mamba_layers(), ConfigError,
                "the draft model has Mamba layers, and a draft reuses its earlier proposals' cache blocks, which "
                "needs attention layers only; fix: give a transformer draft");
  engine_ = std::make_unique<ServingEngine>(std::move(draft), device, draft_engine_options(target, vocabulary));
  engine_->capture_graphs();
}

std::vector<std::vector<int64_t>> DraftModelProposer::propose(const std::vector<Ask>& asks) {
  const auto start = std::chrono::steady_clock::now();
  const EngineStats before = engine_->stats();
  std::vector<std::vector<int64_t>> proposals(asks.size());
  std::map<int64_t, std::size_t> ask_of;  // draft request id -> ask
  for (std::size_t i = 0; i < asks.size(); ++i) {
    const std::vector<int64_t>& tokens = asks[i].request->tokens;
    // A request longer than the draft's context proposes from its latest tokens.
    const int64_t room = engine_->max_sequence() - asks[i].limit;
    if (asks[i].limit <= 0 || room < 1) continue;
    const auto skipped = static_cast<std::ptrdiff_t>(std::max<int64_t>(0, static_cast<int64_t>(tokens.size()) - room));
    RequestOptions options;
    options.max_new_tokens = asks[i].limit;
    ask_of[engine_->add_request({tokens.begin() + skipped, tokens.end()}, std::move(options))] = i;
  }
  while (engine_->has_work()) {
    const StepResult step = engine_->step();
    for (const TokenEvent& event : step.tokens) proposals[ask_of.at(event.request)].push_back(event.token);
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
