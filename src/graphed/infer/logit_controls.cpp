// infer/logit_controls.cpp — see infer/logit_controls.h. Plain ATen ops (they run on the CPU and inside CUDA
// graphs alike): each is a pass over [requests, vocabulary], paid only by steps that ask for it.
#include "graphed/infer/logit_controls.h"

#include <limits>

#include "graphed/kernels/sampling_ops.h"

namespace graphed::infer {
namespace {

at::Tensor column(const at::Tensor& values) { return values.to(at::kFloat).unsqueeze(1); }

}  // namespace

LogitTables LogitTables::zeros(int64_t slots, int64_t vocabulary, const at::Device& device) {
  const auto options = at::TensorOptions().device(device);
  return {at::zeros({slots, vocabulary}, options.dtype(at::kFloat)),
          at::zeros({slots, vocabulary}, options.dtype(at::kInt)),
          at::zeros({slots, vocabulary}, options.dtype(at::kBool))};
}

at::Tensor apply_controls(const at::Tensor& logits, const ControlRows& rows, const LogitTables& tables) {
  at::Tensor out = logits + tables.bias.index_select(0, rows.slot);
  const at::Tensor counts = tables.counts.index_select(0, rows.slot);
  const at::Tensor drawn = counts.gt(0);
  const at::Tensor seen = at::logical_or(tables.prompt_seen.index_select(0, rows.slot), drawn);
  const at::Tensor repetition = column(rows.repetition);
  out = at::where(seen, at::where(out.gt(0), out / repetition, out * repetition), out);
  out = out - counts.to(at::kFloat) * column(rows.frequency) - drawn.to(at::kFloat) * column(rows.presence);
  const at::Tensor floor = std::get<0>(out.max(1, /*keepdim=*/true)) + column(rows.min_p_gap);
  return out.masked_fill(out.lt(floor), -std::numeric_limits<float>::infinity());
}

at::Tensor apply_token_mask(const at::Tensor& logits, const at::Tensor& mask) {
  const int64_t rows = logits.size(0);
  const int64_t vocabulary = logits.size(1);
  const at::Tensor shifts = at::arange(32, mask.options());
  const at::Tensor bits = at::bitwise_and(at::__rshift__(mask.unsqueeze(2), shifts), 1);  // [rows, words, 32]
  const at::Tensor allowed = bits.view({rows, -1}).narrow(1, 0, vocabulary).to(at::kBool);
  return logits.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
}

void count_drawn(const LogitTables& tables, const at::Tensor& count_slot, const at::Tensor& tokens) {
  const int64_t vocabulary = tables.counts.size(1);
  const at::Tensor cells = count_slot * vocabulary + tokens;
  tables.counts.view(-1).scatter_add_(0, cells, at::ones_like(cells, tables.counts.options()));
}

void record_top_logprobs(const at::Tensor& logits, at::Tensor& out, at::Tensor& top_ids) {
  kernels::top_logprobs_into(logits, out, top_ids);
}

void record_drawn_logprob(const at::Tensor& logits, const at::Tensor& tokens, at::Tensor& out) {
  const at::Tensor partition = out.narrow(1, 0, 1).clone();
  out.narrow(1, 0, 1).copy_(logits.gather(1, tokens.unsqueeze(1)) - partition);
}

}  // namespace graphed::infer
