// kernels/gumbel_max.h — the sampler's draw as one pass over the logits, free of ATen (pointers, sizes, a
// stream): each row's argmax of logit / temperature + Gumbel noise (kernels/detail/gumbel_noise.h), the noise
// computed where it can matter and never stored. Sampling then costs about what greedy's argmax costs and
// allocates nothing. The ATen face is kernels/sampling_ops.h; the top-k and top-p filters arrive as a cut,
// a (value, column) per row. A launch that fails throws graphed::Error (kernels/detail/launch_check.h).
#pragma once

#include <cstdint>

namespace graphed::kernels {

/// Each row's settings, device pointers of [rows] each.
struct GumbelMaxRows {
  const double* temperature = nullptr;  ///< <= 0: the row's plain argmax (greedy)
  /// null, or the smallest (logit / temperature, column) drawn: a column is drawn when its value is above
  /// threshold, or equal to it at a column up to threshold_column (the top-k / top-p cut by position).
  const float* threshold = nullptr;
  const int64_t* threshold_column = nullptr;
  const int64_t* seed_state = nullptr;  ///< the seed's part of the hash (a 32-bit word)
  const int64_t* draw = nullptr;        ///< the index of the token being drawn
  bool row_word_is_index = false;       ///< the row's index joins the hash (else 0)
};

/// out[r] = argmax over columns c < columns of logits[r * row_stride + c] / t_r + gumbel(r, c) (ties to the first
/// column, a NaN above every number); `below_top` is detail::gumbel_below_top(). out: int64 [rows], rows up to
/// 65,535 (a grid's second dimension).
void launch_gumbel_max(const float* logits, int64_t row_stride, int64_t rows, int64_t columns,
                       const GumbelMaxRows& settings, float below_top, int64_t* out, void* stream);

}  // namespace graphed::kernels
