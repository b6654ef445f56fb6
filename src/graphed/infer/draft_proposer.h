// infer/draft_proposer.h — speculative decoding's draft-model proposer (vLLM's "draft_model" method): a smaller model
// of the target's tokenizer, served by an engine of its own (its own paged cache and graphs), proposes the next tokens
// of a step's speculating requests greedily, all of them at once. Each proposal is a fresh request of the draft engine
// over the target request's tokens, and the draft engine shares prompt prefixes: the blocks its last proposal
// computed are taken back, and only the tokens since their last full block run again, as one prompt chunk.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graphed/infer/serving_engine.h"
#include "graphed/infer/speculation.h"

namespace graphed::infer {

/// The draft engine's options: the target engine's step limits and graphs, its positions per request where the
/// draft's `draft_context` holds them, small blocks, chunked prefill, prefix sharing, greedy draws below `vocabulary`
/// (the target's drawable tokens), no speculation of its own.
ServingOptions draft_engine_options(const ServingOptions& target, int64_t vocabulary, int64_t draft_context);

class DraftModelProposer final : public Proposer {
 public:
  /// The draft's blocks (positions per cache block): prefix sharing takes back whole blocks.
  static constexpr int64_t kBlockSize = 16;
  /// On a GPU, the most of the free memory the draft's cache takes (the target's cache is sized after it).
  static constexpr double kMemoryShare = 0.25;

  /// `draft` in eval mode on `device`; `target`: the target engine's options; `vocabulary`: the ids the target draws
  /// (its tokenizer's). Captures the draft's graphs now, so that the target's cache is sized after them. Throws
  /// ConfigError for a draft whose vocabulary is smaller, or with Mamba layers (prefix sharing needs attention).
  DraftModelProposer(model::GptModel draft, const at::Device& device, const ServingOptions& target, int64_t vocabulary);

  std::vector<std::vector<int64_t>> propose(const std::vector<Ask>& asks) override;
  /// Always: the draft proposes from every token.
  bool worth_waiting(const Request& /*request*/) const override { return true; }
  ProposerWork work() const override;

  const ServingEngine& engine() const { return *engine_; }

 private:
  std::unique_ptr<ServingEngine> engine_;
  ProposerWork work_;
};

}  // namespace graphed::infer
