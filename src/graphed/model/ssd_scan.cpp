// model/ssd_scan.cpp — see model/ssd_scan.h. Index names in the einsum equations: b batch, c chunk,
// i and j positions in a chunk (i the output, j the input), h head, p head channel, n state.
#include "graphed/model/ssd_scan.h"

#include <limits>

#include "graphed/util/error.h"

namespace graphed::model {
namespace {

/// B or C per head: [batch, length, g, n] -> [batch, length, h, n].
at::Tensor per_head(const at::Tensor& grouped, int64_t heads) {
  const int64_t groups = grouped.size(2);
  return groups == heads ? grouped : grouped.repeat_interleave(heads / groups, 2);
}

void check_inputs(const ScanInputs& in) {
  GRAPHED_INTERNAL_ASSERT(in.x.dim() == 4 && in.dt.dim() == 3 && in.a.dim() == 1 && in.b.dim() == 4 && in.c.dim() == 4,
                          "scan inputs of the wrong rank");
  GRAPHED_INTERNAL_ASSERT(in.x.size(2) % in.b.size(2) == 0, "heads ", in.x.size(2), " not a multiple of groups ",
                          in.b.size(2));
}

/// Pads dimension 1 (length) of x with zeros up to `length`.
at::Tensor pad_length(const at::Tensor& x, int64_t length) {
  if (x.size(1) == length) return x;
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[1] = length - x.size(1);
  return at::cat({x, at::zeros(sizes, x.options())}, 1);
}

/// [batch, chunks x q, rest...] -> [batch, chunks, q, rest...]
at::Tensor in_chunks(const at::Tensor& x, int64_t q) {
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[1] = x.size(1) / q;
  sizes.insert(sizes.begin() + 2, q);
  return x.reshape(sizes);
}

}  // namespace

ScanOutput sequential_scan(const ScanInputs& in) {
  check_inputs(in);
  const int64_t heads = in.x.size(2);
  const at::Tensor b = per_head(in.b, heads);
  const at::Tensor c = per_head(in.c, heads);
  at::Tensor state = in.initial_state.defined()
                         ? in.initial_state
                         : at::zeros({in.x.size(0), heads, in.x.size(3), in.b.size(3)}, in.x.options());
  std::vector<at::Tensor> outputs;
  for (int64_t t = 0; t < in.x.size(1); ++t) {
    const at::Tensor dt = in.dt.select(1, t);                                       // [batch, h]
    const at::Tensor decay = at::exp(dt * in.a).unsqueeze(-1).unsqueeze(-1);        // [batch, h, 1, 1]
    const at::Tensor input = (in.x.select(1, t) * dt.unsqueeze(-1)).unsqueeze(-1);  // [batch, h, p, 1]
    state = decay * state + input * b.select(1, t).unsqueeze(2);                    // [batch, h, p, n]
    outputs.push_back(at::einsum("bhpn,bhn->bhp", {state, c.select(1, t)}));
  }
  return {at::stack(outputs, 1), state};
}

ScanOutput chunked_scan(const ScanInputs& in, int64_t chunk_size) {
  check_inputs(in);
  GRAPHED_INTERNAL_ASSERT(chunk_size >= 1, "chunk size ", chunk_size);
  const int64_t length = in.x.size(1);
  const int64_t heads = in.x.size(2);
  const int64_t padded = (length + chunk_size - 1) / chunk_size * chunk_size;
  const at::Tensor x = in_chunks(pad_length(in.x, padded), chunk_size);                   // [b, c, q, h, p]
  const at::Tensor dt = in_chunks(pad_length(in.dt, padded), chunk_size);                 // [b, c, q, h]
  const at::Tensor b = in_chunks(pad_length(per_head(in.b, heads), padded), chunk_size);  // [b, c, q, h, n]
  const at::Tensor c = in_chunks(pad_length(per_head(in.c, heads), padded), chunk_size);
  // The log decay from the chunk's start, summed along the innermost dimension (a scan along an outer
  // one is many times slower on a GPU): [b, c, h, q], and the same values seen as [b, c, q, h].
  const at::Tensor from = at::cumsum((dt * in.a).permute({0, 1, 3, 2}).contiguous(), -1);
  const at::Tensor decay_sum = from.permute({0, 1, 3, 2});
  const at::Tensor weighted_x = x * dt.unsqueeze(-1);

  // 1. Inside each chunk: y_i += sum over j <= i of exp(decay_i - decay_j) (c_i . b_j) dt_j x_j.
  const at::Tensor gap = from.unsqueeze(-1) - from.unsqueeze(-2);  // [b, c, h, i, j]
  const at::Tensor causal = at::ones({chunk_size, chunk_size}, in.x.options().dtype(at::kBool)).tril();
  const at::Tensor decays = at::exp(at::where(causal, gap, -std::numeric_limits<double>::infinity()));
  const at::Tensor scores = at::einsum("bcihn,bcjhn->bchij", {c, b}) * decays;
  const at::Tensor within = at::einsum("bchij,bcjhp->bcihp", {scores, weighted_x});

  // 2. Each chunk's own contribution to the state at its end.
  const at::Tensor to_end = at::exp(decay_sum.narrow(2, chunk_size - 1, 1) - decay_sum);  // [b, c, q, h]
  const at::Tensor chunk_states = at::einsum("bcjhn,bcjhp->bchpn", {b * to_end.unsqueeze(-1), weighted_x});

  // 3. The state entering each chunk: the previous one decayed over that chunk, plus its own part.
  const at::Tensor chunk_decay = at::exp(decay_sum.select(2, chunk_size - 1));  // [b, c, h]
  at::Tensor state = in.initial_state.defined() ? in.initial_state : at::zeros_like(chunk_states.select(1, 0));
  std::vector<at::Tensor> entering;
  for (int64_t chunk = 0; chunk < chunk_states.size(1); ++chunk) {
    entering.push_back(state);
    state = chunk_decay.select(1, chunk).unsqueeze(-1).unsqueeze(-1) * state + chunk_states.select(1, chunk);
  }
  const at::Tensor previous = at::stack(entering, 1);  // [b, c, h, p, n]

  // 4. What the entering state gives each position: exp(decay_i) (state c_i).
  const at::Tensor carried = at::einsum("bcihn,bchpn->bcihp", {c, previous}) * at::exp(decay_sum).unsqueeze(-1);
  const at::Tensor y = (within + carried).reshape({x.size(0), padded, heads, x.size(4)}).narrow(1, 0, length);
  return {y, state};
}

}  // namespace graphed::model
