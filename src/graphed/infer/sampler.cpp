// infer/sampler.cpp — see infer/sampler.h. The hash absorbs one 32-bit word at a time into a 32-bit
// state through Thomas Mueller's integer mix (a bijection with full avalanche): the seed's two halves
// on the host, then the step, the row and the column with int64 tensor ops whose products stay below
// 2^63 (no overflow on any backend). A word joins only after the words before it were mixed, so
// seed + 1 is not step + 1 (the earlier hash added them, and seed s + 1 replayed seed s one step on).
#include "graphed/infer/sampler.h"

#include <limits>

namespace graphed::infer {
namespace {

constexpr int64_t kLow32 = 0xffffffffLL;
constexpr int64_t kMultiplier = 0x45d9f3bLL;
constexpr uint32_t kInitialState = 0x9e3779b9u;  // the golden ratio's bits: the state before any word

/// One round of the mix on the host.
uint32_t mix(uint32_t x) {
  x = (x ^ (x >> 16)) * static_cast<uint32_t>(kMultiplier);
  x = (x ^ (x >> 16)) * static_cast<uint32_t>(kMultiplier);
  return x ^ (x >> 16);
}

/// The same round on a tensor of values in [0, 2^32).
at::Tensor mix(at::Tensor x) {
  x = at::bitwise_and(at::bitwise_xor(x, at::__rshift__(x, 16)) * kMultiplier, kLow32);
  x = at::bitwise_and(at::bitwise_xor(x, at::__rshift__(x, 16)) * kMultiplier, kLow32);
  return at::bitwise_xor(x, at::__rshift__(x, 16));
}

at::Tensor keep_top_k(const at::Tensor& logits, int64_t k) {
  if (k <= 0 || k >= logits.size(-1)) return logits;
  const at::Tensor threshold = std::get<0>(logits.topk(k, -1)).narrow(-1, k - 1, 1);
  return logits.masked_fill(logits < threshold, -std::numeric_limits<double>::infinity());
}

/// Keeps the likeliest tokens until their probabilities reach p (at least one).
at::Tensor keep_top_p(const at::Tensor& logits, double p) {
  if (p >= 1.0) return logits;
  const auto [sorted, order] = logits.sort(-1, /*descending=*/true);
  const at::Tensor probabilities = at::softmax(sorted, -1);
  const at::Tensor before = probabilities.cumsum(-1) - probabilities;  // mass of the likelier tokens
  const at::Tensor drop = at::zeros_like(before, at::kBool).scatter(-1, order, before > p);
  return logits.masked_fill(drop, -std::numeric_limits<double>::infinity());
}

}  // namespace

uint32_t seed_state(uint64_t seed) {
  return mix(mix(kInitialState ^ static_cast<uint32_t>(seed)) ^ static_cast<uint32_t>(seed >> 32));
}

at::Tensor hashed_uniform(int64_t rows, int64_t vocab, uint64_t seed, const at::Tensor& step) {
  const auto options = step.options().dtype(at::kLong);
  const at::Tensor step_state =
      mix(at::bitwise_xor(at::bitwise_and(step, kLow32), static_cast<int64_t>(seed_state(seed))));
  const at::Tensor row_state = mix(at::bitwise_xor(at::arange(rows, options).view({rows, 1}), step_state));
  const at::Tensor bits = mix(at::bitwise_xor(at::arange(vocab, options).view({1, vocab}), row_state));
  return (bits.to(at::kDouble) + 0.5) * (1.0 / 4294967296.0);
}

at::Tensor sample_tokens(const at::Tensor& all_logits, const SamplingOptions& options, const at::Tensor& step) {
  const bool padded = options.vocabulary > 0 && options.vocabulary < all_logits.size(-1);
  const at::Tensor logits = padded ? all_logits.narrow(-1, 0, options.vocabulary) : all_logits;
  if (options.is_greedy()) return logits.argmax(-1);
  at::Tensor scaled = keep_top_p(keep_top_k(logits / options.temperature, options.top_k), options.top_p);
  const at::Tensor uniform = hashed_uniform(logits.size(0), logits.size(1), options.seed, step);
  const at::Tensor gumbel = at::neg(at::log(at::neg(at::log(uniform)))).to(scaled.scalar_type());
  return (scaled + gumbel).argmax(-1);
}

SamplingMode sampling_mode_of(const SamplingOptions& options) {
  if (options.is_greedy()) return SamplingMode::kGreedy;
  if (options.top_k > 0 || options.top_p < 1.0) return SamplingMode::kFiltered;
  return SamplingMode::kTemperature;
}

namespace {

/// Uniform noise [requests, vocab] with each row's own seed state and draw index (row word 0).
at::Tensor hashed_uniform_rows(const at::Tensor& seed_states, const at::Tensor& draws, int64_t vocab) {
  const at::Tensor step_state = mix(at::bitwise_xor(at::bitwise_and(draws, kLow32), seed_states));
  const at::Tensor row_state = mix(step_state).unsqueeze(1);  // the row word is 0: mix(0 ^ state)
  const at::Tensor bits = mix(at::bitwise_xor(at::arange(vocab, draws.options()).view({1, vocab}), row_state));
  return (bits.to(at::kDouble) + 0.5) * (1.0 / 4294967296.0);
}

/// Drops, per row, the tokens outside its top-k (ties with the k-th kept) and then outside its top-p:
/// what keep_top_k and keep_top_p do to one row.
at::Tensor filter_rows(const at::Tensor& scaled, const at::Tensor& top_k, const at::Tensor& top_p) {
  const int64_t vocab = scaled.size(-1);
  const double infinity = std::numeric_limits<double>::infinity();
  const auto [sorted, order] = scaled.sort(-1, /*descending=*/true);
  const at::Tensor k = at::where(top_k.gt(0).logical_and(top_k.lt(vocab)), top_k, at::full_like(top_k, vocab));
  const at::Tensor kth = sorted.gather(1, (k - 1).unsqueeze(1));
  const at::Tensor probabilities = at::softmax(sorted.masked_fill(sorted < kth, -infinity), -1);
  const at::Tensor before = probabilities.cumsum(-1) - probabilities;  // mass of the likelier tokens
  // A row with top-p 1 keeps everything (as keep_top_p does): rounding can push `before` past 1.
  const at::Tensor drop_sorted =
      before.gt(top_p.to(before.scalar_type()).unsqueeze(1)).logical_and(top_p.lt(1.0).unsqueeze(1));
  const at::Tensor drop = at::zeros_like(drop_sorted).scatter(-1, order, drop_sorted);
  return scaled.masked_fill(drop.logical_or(scaled < kth), -infinity);
}

}  // namespace

at::Tensor sample_rows(const at::Tensor& all_logits, const SamplingRows& rows, SamplingMode mode, int64_t vocabulary) {
  const bool padded = vocabulary > 0 && vocabulary < all_logits.size(-1);
  const at::Tensor logits = padded ? all_logits.narrow(-1, 0, vocabulary) : all_logits;
  const at::Tensor greedy = logits.argmax(-1);
  if (mode == SamplingMode::kGreedy) return greedy;
  const at::Tensor sampling = rows.temperature.gt(0);
  const at::Tensor temperature = at::where(sampling, rows.temperature, at::ones_like(rows.temperature));
  at::Tensor scaled = logits / temperature.to(logits.scalar_type()).unsqueeze(1);
  if (mode == SamplingMode::kFiltered) scaled = filter_rows(scaled, rows.top_k, rows.top_p);
  const at::Tensor uniform = hashed_uniform_rows(rows.seed_state, rows.draw, logits.size(1));
  const at::Tensor gumbel = at::neg(at::log(at::neg(at::log(uniform)))).to(scaled.scalar_type());
  return at::where(sampling, (scaled + gumbel).argmax(-1), greedy);
}

}  // namespace graphed::infer
