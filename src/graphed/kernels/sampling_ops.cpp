// kernels/sampling_ops.cpp — see kernels/sampling_ops.h; both builds (the CUDA launch is sampling_ops_cuda.cpp's:
// src/graphed/CMakeLists.txt). The CPU loop runs the kernel's two passes over a whole row (kernels/gumbel_max.cu
// says why two), tightening its bound as better columns turn up.
#include "graphed/kernels/sampling_ops.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>

#include "graphed/kernels/detail/gumbel_noise.h"
#include "graphed/util/error.h"

namespace graphed::kernels {
namespace {

using detail::kTopNoiseBucket;

uint32_t bits_of(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float value_of(uint64_t key) {
  const uint32_t bits = detail::float_bits_of_key(key);
  float value = 0;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint64_t key_of(float value, int64_t column) { return detail::candidate_key(bits_of(value), column); }

uint64_t greedy_key(const float* logits, int64_t columns) {
  uint64_t best = 0;
  for (int64_t column = 0; column < columns; ++column) best = std::max(best, key_of(logits[column], column));
  return best;
}

/// One sampled row: the top bucket's columns, then those that can still beat the best so far. `floor`: the key of
/// the row's smallest drawable (value, column), 0 when every column is drawn.
uint64_t sampled_key(const float* logits, int64_t columns, float temperature, uint64_t floor, uint32_t state,
                     float below_top) {
  uint64_t best = 0;
  for (int64_t column = 0; column < columns; ++column) {
    const uint32_t bits = detail::noise_bits(state, column);
    if (bits < kTopNoiseBucket) continue;
    const float scaled = logits[column] / temperature;
    if (key_of(scaled, column) >= floor) best = std::max(best, key_of(scaled + detail::gumbel_of(bits), column));
  }
  float reach = value_of(best);
  for (int64_t column = 0; column < columns; ++column) {
    const float scaled = logits[column] / temperature;
    if (scaled + below_top < reach || key_of(scaled, column) < floor) continue;  // cannot win, or cut by the filters
    const uint32_t bits = detail::noise_bits(state, column);
    if (bits >= kTopNoiseBucket) continue;  // the first pass took it
    const uint64_t key = key_of(scaled + detail::gumbel_of(bits), column);
    if (key > best) {
      best = key;
      reach = value_of(best);
    }
  }
  return best;
}

void check_arguments(const at::Tensor& logits, const GumbelRows& rows, const at::Tensor& out) {
  GRAPHED_INTERNAL_ASSERT(logits.dim() == 2 && logits.scalar_type() == at::kFloat && logits.stride(1) == 1,
                          "gumbel_max_into takes float32 logits [rows, columns] with contiguous rows");
  const int64_t count = logits.size(0);
  GRAPHED_INTERNAL_ASSERT(out.scalar_type() == at::kLong && out.is_contiguous() && out.numel() == count,
                          "gumbel_max_into writes a contiguous int64 tensor of ", count, " rows");
  GRAPHED_INTERNAL_ASSERT(rows.threshold.defined() == rows.threshold_column.defined(),
                          "gumbel_max_into's threshold comes with its column");
  for (const at::Tensor* setting :
       {&rows.temperature, &rows.seed_state, &rows.draw, &rows.threshold, &rows.threshold_column}) {
    GRAPHED_INTERNAL_ASSERT(!setting->defined() || (setting->numel() == count && setting->is_contiguous() &&
                                                    setting->device() == logits.device()),
                            "gumbel_max_into's row settings must be contiguous [", count, "] on the logits' device");
  }
  GRAPHED_INTERNAL_ASSERT(rows.temperature.scalar_type() == at::kDouble && rows.seed_state.scalar_type() == at::kLong &&
                              rows.draw.scalar_type() == at::kLong &&
                              (!rows.threshold.defined() || (rows.threshold.scalar_type() == at::kFloat &&
                                                             rows.threshold_column.scalar_type() == at::kLong)),
                          "gumbel_max_into's row settings have the wrong dtypes");
}

void gumbel_max_on_host(const at::Tensor& logits, const GumbelRows& rows, at::Tensor& out, float below_top) {
  const int64_t columns = logits.size(1);
  const int64_t stride = logits.stride(0);
  const float* data = logits.data_ptr<float>();
  const double* temperature = rows.temperature.data_ptr<double>();
  const float* threshold = rows.threshold.defined() ? rows.threshold.data_ptr<float>() : nullptr;
  const int64_t* threshold_column = rows.threshold.defined() ? rows.threshold_column.data_ptr<int64_t>() : nullptr;
  const int64_t* seed_state = rows.seed_state.data_ptr<int64_t>();
  const int64_t* draw = rows.draw.data_ptr<int64_t>();
  int64_t* drawn = out.data_ptr<int64_t>();
  at::parallel_for(0, logits.size(0), 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const float* row_logits = data + row * stride;
      uint64_t key = 0;
      if (temperature[row] > 0.0) {
        const uint32_t state = detail::noise_row_state(static_cast<uint32_t>(seed_state[row]), draw[row],
                                                       rows.row_word_is_index ? static_cast<uint32_t>(row) : 0u);
        const uint64_t floor = threshold != nullptr ? key_of(threshold[row], threshold_column[row]) : 0;
        key = sampled_key(row_logits, columns, static_cast<float>(temperature[row]), floor, state, below_top);
      } else {
        key = greedy_key(row_logits, columns);
      }
      drawn[row] = detail::column_of_key(key);
    }
  });
}

}  // namespace

void gumbel_max_into(const at::Tensor& logits, const GumbelRows& rows, at::Tensor& out) {
  check_arguments(logits, rows, out);
  GRAPHED_INTERNAL_ASSERT(logits.size(0) <= 65535, "gumbel_max_into draws at most 65,535 rows at once, got ",
                          logits.size(0));
  static const float below_top = detail::gumbel_below_top();
  if (logits.is_cuda()) {
    device::gumbel_max_into(logits, rows, out, below_top);
  } else {
    gumbel_max_on_host(logits, rows, out, below_top);
  }
}

uint32_t noise_seed_state(uint64_t seed) {
  constexpr uint32_t kInitialState = 0x9e3779b9u;  // the golden ratio's bits: the state before any word
  return detail::mix_word(detail::mix_word(kInitialState ^ static_cast<uint32_t>(seed)) ^
                          static_cast<uint32_t>(seed >> 32));
}

void top_logprobs_into(const at::Tensor& logits, at::Tensor& out, at::Tensor& top_ids) {
  const int64_t top = top_ids.size(1);
  GRAPHED_INTERNAL_ASSERT(logits.dim() == 2 && logits.scalar_type() == at::kFloat && logits.stride(1) == 1 &&
                              out.is_contiguous() && top_ids.is_contiguous() && out.size(1) == 1 + top &&
                              top <= std::min<int64_t>(32, logits.size(1)),
                          "top_logprobs_into takes float32 logits with contiguous rows and ", top,
                          " columns of ids, at most 32 and the logits' columns");
  if (logits.is_cuda()) {
    device::top_logprobs_into(logits, out, top_ids);
    return;
  }
  const at::Tensor partition = logits.logsumexp(1, /*keepdim=*/true);
  // A stable descending sort keeps the smaller column first among ties, as the kernel does.
  const auto sorted = logits.sort(/*stable=*/true, 1, /*descending=*/true);
  out.narrow(1, 0, 1).copy_(partition);
  out.narrow(1, 1, top).copy_(std::get<0>(sorted).narrow(1, 0, top) - partition);
  top_ids.copy_(std::get<1>(sorted).narrow(1, 0, top));
}

}  // namespace graphed::kernels
