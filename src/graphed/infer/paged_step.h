// infer/paged_step.h — one serving step through the model, in the pieces the graph scopes need: begin
// (embed the step's tokens into the static hidden buffer), one call per layer over the paged cache,
// logits (final norm and logits of each request's last token, the log probabilities it reports), sample
// (the requests' controls and token masks, the draw, written to the static output). Every piece reads and
// writes only StepViews' buffers and the cache, so the same code runs eagerly, per layer in graphs (scope
// layer) or whole in one graph (scope block; two for a masked step, split before sampling), with the same bits.
#pragma once

#include <cstdint>

#include "graphed/infer/paged_cache.h"
#include "graphed/infer/step_inputs.h"
#include "graphed/model/gpt_model.h"

namespace graphed::infer {

class PagedStep {
 public:
  /// `vocabulary`: draw only ids below it (SamplingOptions::vocabulary; 0 = all).
  PagedStep(model::GptModel model, const PagedCache& cache, int64_t vocabulary);

  void begin(StepViews& views);
  at::Tensor layer(int64_t index, const at::Tensor& hidden, StepViews& views);
  /// The logits each request draws from: [requests, drawable vocabulary] float32.
  at::Tensor logits(const at::Tensor& hidden, StepViews& views);
  void sample(const at::Tensor& logits, StepViews& views);
  /// begin, every layer, logits.
  at::Tensor forward(StepViews& views);
  /// forward, sample.
  void run(StepViews& views);

  int64_t layer_count() const { return static_cast<int64_t>(cache_.layers().size()); }
  const config::ModelConfig& config() const { return model_->config(); }

 private:
  model::GptModel model_;
  const PagedCache& cache_;
  int64_t vocabulary_;
};

}  // namespace graphed::infer
