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

void PagedStep::finish(const at::Tensor& hidden, StepViews& views) {
  const at::Tensor last = hidden.index_select(1, views.last_token);  // [1, requests, h]
  const at::Tensor logits = model_->decode_logits(last).view({views.last_token.size(0), -1});
  sample_rows_into(logits, views.sampling, views.mode, vocabulary_, views.next_tokens);
}

void PagedStep::run(StepViews& views) {
  begin(views);
  at::Tensor hidden = views.hidden;
  for (int64_t i = 0; i < layer_count(); ++i) hidden = layer(i, hidden, views);
  finish(hidden, views);
}

}  // namespace graphed::infer
