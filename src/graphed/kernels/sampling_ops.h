// kernels/sampling_ops.h — the ATen face of kernels/gumbel_max.h: each row's draw written into a given int64
// tensor, by the CUDA kernel for CUDA tensors and by the same two passes in a CPU loop for CPU tensors (rows in
// parallel). Nothing is allocated, so a draw can sit inside a CUDA graph and costs a CPU server no page faults.
// The noise is kernels/detail/gumbel_noise.h's: the same seed draws the same tokens on every run of one device.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace graphed::kernels {

/// Each row's settings, tensors [rows] on the logits' device.
struct GumbelRows {
  at::Tensor temperature;  ///< float64; <= 0: the row's argmax
  /// float32, or undefined (every column drawn): with threshold_column (int64), the smallest (logit / temperature,
  /// column) drawn: a value above threshold, or equal to it at a column up to threshold_column.
  at::Tensor threshold;
  at::Tensor threshold_column;
  at::Tensor seed_state;           ///< int64: noise_seed_state(seed)
  at::Tensor draw;                 ///< int64: the index of the token being drawn
  bool row_word_is_index = false;  ///< the row's index joins the hash (else 0)
};

/// out[r] = argmax_c logits[r, c] / t_r + gumbel(seed, draw, row, c), ties to the first column and a NaN above
/// every number (as argmax): a draw from softmax(logits[r] / t_r) over the columns the row's threshold keeps.
/// logits: float32 [rows, columns], each row contiguous (a narrowed view of wider rows is fine); out: int64
/// [rows], contiguous.
void gumbel_max_into(const at::Tensor& logits, const GumbelRows& rows, at::Tensor& out);

/// Sets rows.threshold and rows.threshold_column [rows] to each row's top-k / top-p cut: the last (logit /
/// temperature, column) the filters keep in a stable descending order (the larger value first, ties by column).
/// top-k keeps every token tied with the k-th; top-p the likeliest tokens whose probabilities before them stay
/// within top_p (at least one); a token is kept when both keep it. A row without filters, or greedy, keeps all.
/// top_k int64 and top_p float64, [rows], on the logits' device. CUDA tensors sort each row; CPU tensors select,
/// sorting no more than the tokens where the mass passes top-p (kernels/sampling_filters.cpp).
void find_filter_cuts(const at::Tensor& logits, const at::Tensor& top_k, const at::Tensor& top_p, GumbelRows& rows);

/// The seed's part of the noise hash: the state after absorbing its two 32-bit halves.
uint32_t noise_seed_state(uint64_t seed);

/// Each row's log probabilities: out[r, 0] = log sum exp of logits[r], out[r, 1 + i] = the i-th largest logit's log
/// probability and top_ids[r, i] its column (larger first, ties by the smaller column), for i < top_ids.size(1) (at
/// most 32 and the columns). logits: float32 [rows, columns], each row contiguous; out: float32 [rows, 1 + top] and
/// top_ids: int64 [rows, top], contiguous. On CUDA tensors kernels/top_logprobs.h (one launch, nothing allocated);
/// on CPU tensors logsumexp and topk.
void top_logprobs_into(const at::Tensor& logits, at::Tensor& out, at::Tensor& top_ids);

namespace device {
/// gumbel_max_into's launch on CUDA tensors, defined by sampling_ops_cuda.cpp (a CPU build's sampling_ops_cpu.cpp
/// asserts: it has no CUDA tensors to pass it).
void gumbel_max_into(const at::Tensor& logits, const GumbelRows& rows, at::Tensor& out, float below_top);
/// top_logprobs_into's launch on CUDA tensors.
void top_logprobs_into(const at::Tensor& logits, at::Tensor& out, at::Tensor& top_ids);
}  // namespace device

}  // namespace graphed::kernels
