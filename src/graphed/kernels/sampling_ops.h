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
  at::Tensor temperature;          ///< float64; <= 0: the row's argmax
  at::Tensor threshold;            ///< float32, or undefined: only logit / temperature >= threshold is drawn
  at::Tensor seed_state;           ///< int64: noise_seed_state(seed)
  at::Tensor draw;                 ///< int64: the index of the token being drawn
  bool row_word_is_index = false;  ///< the row's index joins the hash (else 0)
};

/// out[r] = argmax_c logits[r, c] / t_r + gumbel(seed, draw, row, c), ties to the first column: a draw from
/// softmax(logits[r] / t_r) over the columns at or above the row's threshold. logits: float32 [rows, columns],
/// each row contiguous (a narrowed view of wider rows is fine); out: int64 [rows], contiguous.
void gumbel_max_into(const at::Tensor& logits, const GumbelRows& rows, at::Tensor& out);

/// The seed's part of the noise hash: the state after absorbing its two 32-bit halves.
uint32_t noise_seed_state(uint64_t seed);

namespace device {
/// gumbel_max_into's launch on CUDA tensors, defined by the build's sampling_ops_cuda.cpp (a CPU build has no
/// CUDA tensors to pass it).
void gumbel_max_into(const at::Tensor& logits, const GumbelRows& rows, at::Tensor& out, float below_top);
}  // namespace device

}  // namespace graphed::kernels
