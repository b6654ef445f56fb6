// infer/sampler.h — picks each row's next token on the device, with no host sync and no generator
// state, so that sampling can sit inside a CUDA graph: greedy (argmax), or temperature, top-k and
// top-p with Gumbel-max noise hashed from (seed, step, row, token). The draw is one pass of
// kernels/sampling_ops.h over the logits (the noise is never stored), so sampling costs about what greedy
// costs; top-k and top-p add each row's cut (kernels/sampling_ops.h find_filter_cuts: a sort on the GPU, a
// selection on the CPU). The same seed gives the same text,
// eager or graphed; ids past the tokenizer's vocabulary (a padded embedding table) are never drawn.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace graphed::infer {

struct SamplingOptions {
  double temperature = 0.0;  ///< 0 = greedy; otherwise the logits are divided by it
  int64_t top_k = 0;         ///< draw among the k likeliest tokens; 0 = all
  double top_p = 1.0;        ///< draw among the likeliest tokens whose probabilities sum to top_p; 1 = all
  /// Draw among tokens whose probability is at least min_p times the likeliest's (vLLM's); 0 = all.
  double min_p = 0.0;
  uint64_t seed = 0;  ///< the noise's seed
  /// Draw only ids below this: the tokenizer's ids, where the model's vocabulary is padded past them
  /// (Megatron pads it to a multiple of 128, and so do many Hugging Face models). 0 = every id.
  int64_t vocabulary = 0;

  bool is_greedy() const { return temperature <= 0.0; }
};

/// The next token of each row: logits [rows, vocab] float32, step: a device int64 tensor [1] (the
/// index of the token being drawn, so that every step draws fresh noise). Returns int64 [rows].
at::Tensor sample_tokens(const at::Tensor& logits, const SamplingOptions& options, const at::Tensor& step);

/// The columns a draw may take, in float32: the first `vocabulary` (the tokenizer's ids where the model's
/// vocabulary is padded; 0 = all).
at::Tensor drawable_logits(const at::Tensor& logits, int64_t vocabulary);

/// Uniform noise in (0, 1), float64 [rows, vocab], from a hash of (seed, step, row, column) in which
/// each word passes through a full mixing round before the next joins it, so that nearby seeds, steps
/// and rows give unrelated noise. The same arguments give the same bits on every device.
at::Tensor hashed_uniform(int64_t rows, int64_t vocab, uint64_t seed, const at::Tensor& step);

/// The seed's part of the noise hash (the state after absorbing its two 32-bit halves), computed once
/// per request on the host.
uint32_t seed_state(uint64_t seed);

/// What a step's sampling must compute: only argmax (every request greedy), Gumbel noise too (some
/// request samples), or also the top-k / top-p filters (some request sets one). A step's graph is
/// keyed on it as well as on its batch dimensions.
enum class SamplingMode { kGreedy = 0, kTemperature = 1, kFiltered = 2 };
/// The mode one request needs.
SamplingMode sampling_mode_of(const SamplingOptions& options);

/// Each request's own settings in one step, as device tensors [requests].
struct SamplingRows {
  at::Tensor temperature;  ///< float64; 0 = greedy
  at::Tensor top_k;        ///< int64; 0 = all
  at::Tensor top_p;        ///< float64; 1 = all
  at::Tensor seed_state;   ///< int64: seed_state(seed)
  at::Tensor draw;         ///< int64: the index of the token being drawn (tokens drawn before it)
};

/// The next token of each request from logits [requests, vocab] float32: greedy rows take the argmax,
/// the others Gumbel-max over their filtered, tempered logits with noise hashed from (seed, draw,
/// token) alone, so a request draws the same tokens whichever requests share its steps (and the same
/// as sample_tokens' row 0 with that seed). `vocabulary` as SamplingOptions::vocabulary. int64 [requests].
at::Tensor sample_rows(const at::Tensor& logits, const SamplingRows& rows, SamplingMode mode, int64_t vocabulary);
/// sample_rows written into `out` (int64 [requests], contiguous); allocates nothing the size of the vocabulary
/// but, on the GPU, the filters' sort.
void sample_rows_into(const at::Tensor& logits, const SamplingRows& rows, SamplingMode mode, int64_t vocabulary,
                      at::Tensor& out);

}  // namespace graphed::infer
