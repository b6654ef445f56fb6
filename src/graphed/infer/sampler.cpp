// infer/sampler.cpp — see infer/sampler.h. The draw itself is kernels/sampling_ops.h's; this file picks the
// columns (the tokenizer's ids) and each row's settings, and asks kernels/ for the top-k / top-p cut where a row
// sets them.
// hashed_uniform states the noise's hash in int64 tensor ops whose products stay below 2^63 (no overflow on any
// backend): the seed's two halves absorbed on the host, then the step, the row and the column, each word
// joining only after the words before it were mixed (so seed + 1 is not step + 1).
#include "graphed/infer/sampler.h"

#include "graphed/kernels/sampling_ops.h"

namespace graphed::infer {
namespace {

constexpr int64_t kLow32 = 0xffffffffLL;
constexpr int64_t kMultiplier = 0x45d9f3bLL;

/// One round of kernels/detail/gumbel_noise.h's mix on a tensor of values in [0, 2^32).
at::Tensor mix(at::Tensor x) {
  x = at::bitwise_and(at::bitwise_xor(x, at::__rshift__(x, 16)) * kMultiplier, kLow32);
  x = at::bitwise_and(at::bitwise_xor(x, at::__rshift__(x, 16)) * kMultiplier, kLow32);
  return at::bitwise_xor(x, at::__rshift__(x, 16));
}

/// The draw of rows whose settings are `settings` but for the threshold, which top-k and top-p set.
void draw_rows(const at::Tensor& logits, kernels::GumbelRows settings, const at::Tensor& top_k, const at::Tensor& top_p,
               SamplingMode mode, at::Tensor& out) {
  if (mode == SamplingMode::kGreedy) {
    at::argmax_out(out, logits, -1);
    return;
  }
  if (mode == SamplingMode::kFiltered) kernels::find_filter_cuts(logits, top_k, top_p, settings);
  kernels::gumbel_max_into(logits, settings, out);
}

}  // namespace

at::Tensor drawable_logits(const at::Tensor& logits, int64_t vocabulary) {
  const bool padded = vocabulary > 0 && vocabulary < logits.size(-1);
  const at::Tensor columns = padded ? logits.narrow(-1, 0, vocabulary) : logits;
  return columns.scalar_type() == at::kFloat ? columns : columns.to(at::kFloat);
}

uint32_t seed_state(uint64_t seed) { return kernels::noise_seed_state(seed); }

at::Tensor hashed_uniform(int64_t rows, int64_t vocab, uint64_t seed, const at::Tensor& step) {
  const auto options = step.options().dtype(at::kLong);
  const at::Tensor step_state =
      mix(at::bitwise_xor(at::bitwise_and(step, kLow32), static_cast<int64_t>(seed_state(seed))));
  const at::Tensor row_state = mix(at::bitwise_xor(at::arange(rows, options).view({rows, 1}), step_state));
  const at::Tensor bits = mix(at::bitwise_xor(at::arange(vocab, options).view({1, vocab}), row_state));
  return (bits.to(at::kDouble) + 0.5) * (1.0 / 4294967296.0);
}

at::Tensor sample_tokens(const at::Tensor& all_logits, const SamplingOptions& options, const at::Tensor& step) {
  const at::Tensor logits = drawable_logits(all_logits, options.vocabulary);
  const int64_t rows = logits.size(0);
  const auto on = [&](at::ScalarType type) { return logits.options().dtype(type); };
  kernels::GumbelRows settings;
  settings.temperature = at::full({rows}, options.is_greedy() ? 0.0 : options.temperature, on(at::kDouble));
  settings.seed_state = at::full({rows}, static_cast<int64_t>(seed_state(options.seed)), on(at::kLong));
  settings.draw = step.to(logits.device(), at::kLong).reshape({1}).expand({rows}).contiguous();
  settings.row_word_is_index = true;
  at::Tensor out = at::empty({rows}, on(at::kLong));
  draw_rows(logits, settings, at::full({rows}, options.top_k, on(at::kLong)),
            at::full({rows}, options.top_p, on(at::kDouble)), sampling_mode_of(options), out);
  return out;
}

SamplingMode sampling_mode_of(const SamplingOptions& options) {
  if (options.is_greedy()) return SamplingMode::kGreedy;
  if (options.top_k > 0 || options.top_p < 1.0) return SamplingMode::kFiltered;
  return SamplingMode::kTemperature;
}

void sample_rows_into(const at::Tensor& all_logits, const SamplingRows& rows, SamplingMode mode, int64_t vocabulary,
                      at::Tensor& out) {
  kernels::GumbelRows settings;
  settings.temperature = rows.temperature;
  settings.seed_state = rows.seed_state;
  settings.draw = rows.draw;
  draw_rows(drawable_logits(all_logits, vocabulary), settings, rows.top_k, rows.top_p, mode, out);
}

at::Tensor sample_rows(const at::Tensor& logits, const SamplingRows& rows, SamplingMode mode, int64_t vocabulary) {
  at::Tensor out = at::empty({logits.size(0)}, logits.options().dtype(at::kLong));
  sample_rows_into(logits, rows, mode, vocabulary, out);
  return out;
}

}  // namespace graphed::infer
