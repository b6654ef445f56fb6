// kernels/sampling_filters.cpp — the top-k / top-p cut of each row (kernels/sampling_ops.h find_filter_cuts): the
// last (value, column) the filters keep in a stable descending order. CUDA tensors sort the row (a few kernels on
// the GPU). CPU tensors never sort a whole row: the k-th value is a selection, and top-p places the tokens' mass
// (exp by LibTorch's vectorized op) in 2,048 buckets of value below the largest, walks them from the top to the
// bucket where the mass passes top-p, and sorts that bucket alone; buffers are reused from step to step. The sums
// are in double here and in float on the GPU: the two can disagree by a rounding where a token's mass meets top-p.
#include "graphed/kernels/sampling_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace graphed::kernels {
namespace {

constexpr int kBuckets = 2048;
constexpr float kLargestSpan = 40.0f;  // below the largest value: e^-40 of its mass; what lies lower shares a bucket
constexpr float kInfinity = std::numeric_limits<float>::infinity();

using Cut = std::pair<float, int64_t>;  // (value, column)

/// What the cuts of a batch of rows share: the rows scaled by their temperatures, each value's weight
/// exp(value - its row's largest) (both [rows, columns], computed by LibTorch's vectorized ops into buffers reused
/// from step to step), and a thread's buffers for one row.
struct Scratch {
  at::Tensor scaled, weights;  // grown as needed, never shrunk
  std::vector<float> values;
  std::vector<double> mass;
  std::vector<Cut> bucket;
};

/// `buffer` as a [rows, columns] float tensor, reallocated only when it is too small.
at::Tensor reuse(at::Tensor& buffer, int64_t rows, int64_t columns) {
  if (!buffer.defined() || buffer.numel() < rows * columns) buffer = at::empty({rows * columns}, at::kFloat);
  return buffer.narrow(0, 0, rows * columns).view({rows, columns});
}

/// One row: its scaled values and weights, its filters, the buffers it works in.
struct RowFilter {
  const float* scaled = nullptr;
  const float* weights = nullptr;
  int64_t columns = 0;
  int64_t top_k = 0;
  double top_p = 1.0;
  Scratch* scratch = nullptr;
};

/// Buckets of value below the row's largest, over what its values span (at most kLargestSpan).
struct Buckets {
  float largest = 0;
  float per_unit = 0;  // buckets per unit of value

  Buckets(float largest, float lowest) : largest(largest) {
    const float span = std::min(kLargestSpan, largest - lowest);
    per_unit = span > 0 ? static_cast<float>(kBuckets) / span : 0.0f;
  }
  /// 0 at the largest value, the last bucket for the lowest (and whatever lies past the span).
  int of(float value) const {
    const float below = (largest - value) * per_unit;
    return below >= static_cast<float>(kBuckets - 1) ? kBuckets - 1 : static_cast<int>(below);
  }
};

/// The last column holding `value` (the last of its ties in a stable descending order).
Cut last_column_of(const RowFilter& row, float value) {
  int64_t last = 0;
  for (int64_t column = 0; column < row.columns; ++column) {
    if (row.scaled[column] == value) last = column;
  }
  return {value, last};
}

/// The k-th largest value, found by selection (-inf when top-k keeps every column).
float kth_value(const RowFilter& row) {
  if (!(row.top_k > 0 && row.top_k < row.columns)) return -kInfinity;
  std::vector<float>& values = row.scratch->values;
  values.assign(row.scaled, row.scaled + row.columns);
  const auto at = values.begin() + (row.top_k - 1);
  std::nth_element(values.begin(), at, values.end(), std::greater<float>());
  return *at;
}

/// The top-p cut among the values at or above kth (lowest the smallest of them): the last token whose likelier
/// tokens hold at most top_p of their mass.
Cut top_p_cut(const RowFilter& row, float largest, float lowest, float kth) {
  const Buckets buckets(largest, lowest);
  std::vector<double>& mass = row.scratch->mass;
  mass.assign(kBuckets, 0.0);
  double total = 0;
  for (int64_t column = 0; column < row.columns; ++column) {
    if (!(row.scaled[column] >= kth)) continue;
    mass[static_cast<std::size_t>(buckets.of(row.scaled[column]))] += row.weights[column];
    total += row.weights[column];
  }
  const double allowed = row.top_p * total;
  double before = 0;  // the mass of the buckets above
  int crossing = 0;
  while (crossing < kBuckets - 1 && before + mass[static_cast<std::size_t>(crossing)] <= allowed) {
    before += mass[static_cast<std::size_t>(crossing++)];
  }
  std::vector<Cut>& bucket = row.scratch->bucket;
  bucket.clear();
  for (int64_t column = 0; column < row.columns; ++column) {
    const float value = row.scaled[column];
    if (value >= kth && buckets.of(value) == crossing) bucket.emplace_back(value, column);
  }
  if (bucket.empty()) return last_column_of(row, lowest);  // top-p keeps every token (a rounding)
  std::sort(bucket.begin(), bucket.end(), [](const Cut& a, const Cut& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  Cut cut = bucket.front();  // the crossing bucket's first token is kept: the mass before it is at most top_p
  for (const Cut& token : bucket) {
    if (before > allowed) break;
    cut = token;
    before += row.weights[token.second];
  }
  return cut;
}

/// One row's cut: the first NaN where there is one (a sort puts NaNs first), else the top-k / top-p cut.
Cut row_cut(const RowFilter& row, float largest, float lowest) {
  if (std::isnan(largest)) {
    int64_t column = 0;
    while (column < row.columns && !std::isnan(row.scaled[column])) ++column;
    return {largest, column};
  }
  if (largest == -kInfinity) return {largest, 0};
  const float kth = kth_value(row);
  if (row.top_p >= 1.0) return last_column_of(row, kth);
  return top_p_cut(row, largest, std::max(lowest, kth), kth);
}

void find_cuts_on_host(const at::Tensor& logits, const at::Tensor& temperature, const at::Tensor& top_k,
                       const at::Tensor& top_p, GumbelRows& rows) {
  static Scratch scratch;  // the engine's one thread steps: reused from step to step
  const int64_t count = logits.size(0), columns = logits.size(1);
  const at::Tensor divisor = at::where(temperature.gt(0), temperature, at::ones_like(temperature)).to(at::kFloat);
  at::Tensor scaled = reuse(scratch.scaled, count, columns);
  at::div_out(scaled, logits, divisor.unsqueeze(1));  // what the draw divides: the same bits
  const at::Tensor largest = scaled.amax(1), lowest = scaled.amin(1);
  at::Tensor weights = reuse(scratch.weights, count, columns);
  at::sub_out(weights, scaled, largest.unsqueeze(1)).exp_();
  rows.threshold = at::full({count}, -kInfinity, logits.options());
  rows.threshold_column = at::full({count}, columns, logits.options().dtype(at::kLong));  // every column
  const double* temperatures = temperature.data_ptr<double>();
  const int64_t* ks = top_k.data_ptr<int64_t>();
  const double* ps = top_p.data_ptr<double>();
  float* threshold = rows.threshold.data_ptr<float>();
  int64_t* threshold_column = rows.threshold_column.data_ptr<int64_t>();
  for (int64_t r = 0; r < count; ++r) {
    const bool filters = (ks[r] > 0 && ks[r] < columns) || ps[r] < 1.0;
    if (!filters || !(temperatures[r] > 0.0)) continue;
    const RowFilter row{scaled.data_ptr<float>() + r * columns,
                        weights.data_ptr<float>() + r * columns,
                        columns,
                        ks[r],
                        ps[r],
                        &scratch};
    std::tie(threshold[r], threshold_column[r]) =
        row_cut(row, largest.data_ptr<float>()[r], lowest.data_ptr<float>()[r]);
  }
}

void find_cuts_by_sorting(const at::Tensor& logits, const at::Tensor& temperature, const at::Tensor& top_k,
                          const at::Tensor& top_p, GumbelRows& rows) {
  const at::Tensor divisor = at::where(temperature.gt(0), temperature, at::ones_like(temperature));
  const at::Tensor scaled = logits / divisor.to(at::kFloat).unsqueeze(1);
  const int64_t vocab = scaled.size(-1);
  const auto [sorted, order] = scaled.sort(/*stable=*/true, -1, /*descending=*/true);
  const at::Tensor k = at::where(top_k.gt(0).logical_and(top_k.lt(vocab)), top_k, at::full_like(top_k, vocab));
  const at::Tensor kth = sorted.gather(1, (k - 1).unsqueeze(1));
  const at::Tensor within_k = sorted.ge(kth).sum(1, /*keepdim=*/true, at::kLong);
  const at::Tensor probabilities = at::softmax(sorted.masked_fill(sorted < kth, -kInfinity), -1);
  // The mass of the likelier tokens, a running sum that never decreases, so the kept tokens are a prefix.
  const at::Tensor sums = probabilities.cumsum(-1);
  const at::Tensor before = at::cat({at::zeros_like(sums.narrow(1, 0, 1)), sums.narrow(1, 0, vocab - 1)}, 1);
  const at::Tensor kept = before.le(top_p.to(before.scalar_type()).unsqueeze(1)).logical_or(top_p.ge(1.0).unsqueeze(1));
  const at::Tensor last = at::minimum(within_k, kept.sum(1, /*keepdim=*/true, at::kLong)).clamp_min(1) - 1;
  rows.threshold = sorted.gather(1, last).squeeze(1);
  rows.threshold_column = order.gather(1, last).squeeze(1);
}

}  // namespace

void find_filter_cuts(const at::Tensor& logits, const at::Tensor& top_k, const at::Tensor& top_p, GumbelRows& rows) {
  if (logits.is_cuda()) {
    find_cuts_by_sorting(logits, rows.temperature, top_k, top_p, rows);
  } else {
    find_cuts_on_host(logits, rows.temperature.contiguous(), top_k.contiguous(), top_p.contiguous(), rows);
  }
}

}  // namespace graphed::kernels
