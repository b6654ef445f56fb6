// infer/paged_step.cpp — see infer/paged_step.h.
#include "graphed/infer/paged_step.h"

namespace graphed::infer {

PagedStep::PagedStep(model::GptModel model, const PagedCache& cache, int64_t vocabulary)
    : model_(std::move(model)), cache_(cache), vocabulary_(vocabulary) {}

void PagedStep::begin(StepViews& views) {
  const at::Tensor positions = views.batch.context.positions.view({1, -1});
  // Tokens drawn by the step before, still on the device when this step was scheduled, are read from there.
  const at::Tensor& source = views.token_source;
  const at::Tensor previous = views.previous_tokens.index_select(0, source.clamp_min(0));
  const at::Tensor ids = at::where(source.ge(0), previous, views.token_ids.view(-1)).view({1, -1});
  views.hidden.copy_(model_->embed_at(ids, positions));
}

at::Tensor PagedStep::layer(int64_t index, const at::Tensor& hidden, StepViews& views) {
  auto& layer = model_->layers()[static_cast<std::size_t>(index)];
  return layer->forward_paged(hidden, views.batch, cache_.layers()[static_cast<std::size_t>(index)]);
}

at::Tensor PagedStep::logits(const at::Tensor& hidden, StepViews& views) {
  const at::Tensor last = hidden.index_select(1, views.last_token);  // [1, requests, h]
  const at::Tensor all = model_->decode_logits(last).view({views.last_token.size(0), -1});
  at::Tensor logits = drawable_logits(all, vocabulary_);
  if (views.features.logprobs) record_top_logprobs(logits, views.logprobs, views.top_ids);
  return logits;
}

void PagedStep::sample(const at::Tensor& logits, StepViews& views) {
  at::Tensor adjusted = logits;
  if (views.features.controlled) adjusted = apply_controls(adjusted, views.controls, views.tables);
  if (views.features.masked) adjusted = apply_token_mask(adjusted, views.mask);
  sample_rows_into(adjusted, views.sampling, views.mode, /*vocabulary=*/0, views.next_tokens);
  if (views.features.controlled) count_drawn(views.tables, views.controls.count_slot, views.next_tokens);
  if (views.features.logprobs) record_drawn_logprob(logits, views.next_tokens, views.logprobs);
}

at::Tensor PagedStep::forward(StepViews& views) {
  begin(views);
  at::Tensor hidden = views.hidden;
  for (int64_t i = 0; i < layer_count(); ++i) hidden = layer(i, hidden, views);
  return logits(hidden, views);
}

void PagedStep::run(StepViews& views) { sample(forward(views), views); }

}  // namespace graphed::infer
