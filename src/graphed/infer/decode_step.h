// infer/decode_step.h — one decode step of a batch, split into the pieces the graph scopes need:
// begin (embed the current tokens, build the attention mask), one call per layer, finish (final norm,
// logits, sampling, recording the token, advancing the positions). Every piece works in place on a
// DecodeState's device buffers, so that the same code runs eagerly, per layer in graphs (scope
// layer) or whole in one graph (scope block), and gives the same bits. Prefill shares finish().
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/infer/kv_cache.h"
#include "graphed/infer/sampler.h"
#include "graphed/model/gpt_model.h"

namespace graphed::infer {

/// The static device buffers of a batch of `rows` rows (a bucket). Graphs capture their addresses.
struct DecodeState {
  int64_t rows = 0;
  at::Tensor tokens;                     ///< [rows, 1] int64: the token each row feeds next
  at::Tensor positions;                  ///< [rows, 1] int64: where that token sits in its sequence
  at::Tensor step;                       ///< [1] int64: how many tokens each row has generated
  at::Tensor generated;                  ///< [rows, max new tokens] int64: the tokens generated so far
  at::Tensor hidden;                     ///< [rows, 1, hidden] model dtype: the embedded step input
  at::Tensor blocked;                    ///< [rows, 1, 1, max sequence] bool: cache slots a row must not attend to
  std::vector<model::LayerCache> cache;  ///< the engine's cache, first `rows` rows

  /// Back to step 0 at position 0 with token 0 (what capture's warmup step starts from, so that it stays
  /// inside the buffers).
  void reset();
  /// Buffers for `rows` rows over `cache` (which must hold at least that many).
  static DecodeState create(int64_t rows, const KvCache& cache, int64_t max_new_tokens, int64_t hidden_size,
                            const at::TensorOptions& hidden_options);
};

class DecodeStep {
 public:
  DecodeStep(model::GptModel model, SamplingOptions sampling);

  /// Embeds state.tokens at state.positions into state.hidden and masks the cache slots past each
  /// row's position into state.blocked.
  void begin(DecodeState& state);
  /// Layer `index` on `hidden` [rows, 1, h] over the state's cache.
  at::Tensor layer(int64_t index, const at::Tensor& hidden, DecodeState& state);
  /// From the last layer's output [rows, 1, h]: draws each row's next token, records it at
  /// state.step, and moves tokens, positions and step on by one. (Stop tokens are the host's business:
  /// a finished row keeps decoding junk that nobody reads, so every step has the same shape.)
  void finish(const at::Tensor& hidden, DecodeState& state);
  /// begin, every layer, finish.
  void run(DecodeState& state);

  /// Fills the cache with the prompts (one per row, 1 <= length <= max sequence) and draws the first
  /// token of each row (step 0), leaving the state ready for run(). Mamba layers start from zero states
  /// and stop at each row's last prompt token (the padding after a short prompt leaves them alone). Chunked over the
  /// prompt length, so that a long prompt's attention scores stay small. Eager in every scope.
  void prefill(DecodeState& state, const std::vector<std::vector<int64_t>>& prompts);

  int64_t layer_count() const { return layer_count_; }
  const config::ModelConfig& config() const { return config_; }
  model::GptModel& model() { return model_; }

 private:
  model::GptModel model_;
  config::ModelConfig config_;
  int64_t layer_count_;
  SamplingOptions sampling_;
};

}  // namespace graphed::infer
