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

at::Tensor hashed_uniform(int64_t rows, int64_t vocab, uint64_t seed, const at::Tensor& step) {
  const auto options = step.options().dtype(at::kLong);
  const uint32_t seed_state = mix(mix(kInitialState ^ static_cast<uint32_t>(seed)) ^ static_cast<uint32_t>(seed >> 32));
  const at::Tensor step_state = mix(at::bitwise_xor(at::bitwise_and(step, kLow32), static_cast<int64_t>(seed_state)));
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

}  // namespace graphed::infer
