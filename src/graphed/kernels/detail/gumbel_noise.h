// kernels/detail/gumbel_noise.h — the sampler's noise, one definition for the CUDA kernel (gumbel_max.cu) and the
// CPU loop (sampling_ops.cpp): 32-bit words hashed from (seed, draw, row, column), each word joining the state
// only after the words before it went through a full round of Thomas Mueller's integer mix, and the Gumbel
// noise -log(-log(u)) of u = (bits + 0.5) / 2^32, computed in double and rounded to float. infer/sampler.cpp's
// hashed_uniform states the same hash in tensor ops (the tests hold the two together).
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define GRAPHED_NOISE_FUNCTION __host__ __device__ __forceinline__
#else
#define GRAPHED_NOISE_FUNCTION inline
#endif

namespace graphed::kernels::detail {

constexpr uint32_t kNoiseMultiplier = 0x45d9f3bu;
/// Noise bits at or above this are the top 1/256 of u (u > 1 - 2^-8): the only noise above gumbel_below_top().
constexpr uint32_t kTopNoiseBucket = 0xff000000u;

/// One round of the mix: a bijection of 32-bit words with full avalanche.
GRAPHED_NOISE_FUNCTION uint32_t mix_word(uint32_t x) {
  x = (x ^ (x >> 16)) * kNoiseMultiplier;
  x = (x ^ (x >> 16)) * kNoiseMultiplier;
  return x ^ (x >> 16);
}

/// A row's state: its draw index (the low 32 bits), then its row word, absorbed into the seed's state.
GRAPHED_NOISE_FUNCTION uint32_t noise_row_state(uint32_t seed_state, int64_t draw, uint32_t row_word) {
  return mix_word(row_word ^ mix_word(static_cast<uint32_t>(draw) ^ seed_state));
}

/// The noise bits of one column of a row.
GRAPHED_NOISE_FUNCTION uint32_t noise_bits(uint32_t row_state, int64_t column) {
  return mix_word(static_cast<uint32_t>(column) ^ row_state);
}

/// The Gumbel noise of those bits: -log(-log(u)), u = (bits + 0.5) / 2^32, in double, then float. It grows with
/// the bits.
GRAPHED_NOISE_FUNCTION float gumbel_of(uint32_t bits) {
  const double uniform = (static_cast<double>(bits) + 0.5) * (1.0 / 4294967296.0);
  return static_cast<float>(-log(-log(uniform)));
}

/// A bound on gumbel_of(bits) for every bits below kTopNoiseBucket (about 5.54), with room for a log that is off
/// by an ulp: a column whose scaled logit plus this stays below the best value so far cannot win.
inline float gumbel_below_top() { return gumbel_of(kTopNoiseBucket - 1) + 1e-3f; }

/// Orders floats as unsigned words, for a max over keys: a larger float, a larger word; -0 as +0; every NaN
/// above every number (as argmax takes a NaN); the word of -inf is still above 0, the empty key's.
GRAPHED_NOISE_FUNCTION uint32_t ordered_bits(uint32_t float_bits) {
  if ((float_bits & 0x7f800000u) == 0x7f800000u && (float_bits & 0x007fffffu) != 0) return 0xffffffffu;
  if (float_bits == 0x80000000u) float_bits = 0;
  return (float_bits & 0x80000000u) != 0 ? ~float_bits : float_bits | 0x80000000u;
}

/// The float bits a key holds (a NaN for the empty key and for a NaN's, which no comparison passes).
GRAPHED_NOISE_FUNCTION uint32_t float_bits_of_key(uint64_t key) {
  if (key == 0) return 0xffffffffu;
  const auto ordered = static_cast<uint32_t>(key >> 32);
  return (ordered & 0x80000000u) != 0 ? ordered & 0x7fffffffu : ~ordered;
}

/// The key of a candidate: its value first, then the smaller column (ties go to the first column, as argmax's).
/// 0 is below every key: no candidate.
GRAPHED_NOISE_FUNCTION uint64_t candidate_key(uint32_t float_bits, int64_t column) {
  return (static_cast<uint64_t>(ordered_bits(float_bits)) << 32) | (0xffffffffu - static_cast<uint32_t>(column));
}

/// The column a key names (0 for the empty key).
GRAPHED_NOISE_FUNCTION int64_t column_of_key(uint64_t key) {
  return key == 0 ? 0 : static_cast<int64_t>(0xffffffffu - static_cast<uint32_t>(key & 0xffffffffu));
}

}  // namespace graphed::kernels::detail
