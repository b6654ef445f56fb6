// infer/batch_buckets.cpp — see infer/batch_buckets.h. Follows research/megatron-cudagraphs.md §6.4
// step by step; the worked examples there are the tests (tests/infer/batch_buckets_test.cpp).
#include "graphed/infer/batch_buckets.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>

#include "graphed/util/error.h"

namespace graphed::infer {
namespace {

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }
int64_t round_down(int64_t value, int64_t multiple) { return value / multiple * multiple; }

/// Sorted descending, without duplicates.
std::vector<int64_t> descending_unique(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end(), std::greater<>());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

std::vector<int64_t> exponential_token_counts(int64_t tp, int64_t graphs, int64_t max_tokens) {
  if (graphs == 1) return {round_down(max_tokens, tp)};
  std::vector<int64_t> counts;
  const int64_t rounder = 2;
  int64_t value = round_down(max_tokens, tp);
  for (int64_t i = 0; i < graphs && value >= 1; ++i, value /= 2) {
    counts.push_back(round_up(std::max(rounder, value / rounder * rounder), tp));
  }
  counts.push_back(max_tokens);
  counts.push_back(tp);
  counts = descending_unique(counts);
  while (static_cast<int64_t>(counts.size()) > graphs) counts.erase(counts.end() - 2);  // the second-smallest
  return counts;
}

std::vector<int64_t> linear_token_counts(int64_t tp, int64_t graphs, int64_t max_tokens) {
  std::vector<int64_t> counts;
  if (graphs == -1) {
    std::vector<int64_t> sizes{1, 2, 4};
    for (int64_t size = 8; size < 256; size += 8) sizes.push_back(size);
    for (int64_t size = 256; size <= max_tokens; size += 16) sizes.push_back(size);
    for (const int64_t size : sizes) {
      const int64_t rounded = round_up(size, tp);
      if (rounded <= max_tokens && std::find(counts.begin(), counts.end(), rounded) == counts.end())
        counts.push_back(rounded);
    }
    if (counts.empty() || counts.back() != max_tokens) counts.push_back(max_tokens);
    std::reverse(counts.begin(), counts.end());
    return counts;
  }
  int64_t step = round_up((max_tokens + graphs - 1) / graphs, 2);
  step = std::max(tp, round_up(step, tp));
  const int64_t largest = round_down(max_tokens, tp);
  for (int64_t size = step; size < largest; size += step) counts.push_back(size);
  counts.push_back(largest);
  return descending_unique(counts);
}

}  // namespace

bool BatchDimensions::operator==(const BatchDimensions& other) const {
  return token_count == other.token_count && prefill_count == other.prefill_count && decode_count == other.decode_count;
}

bool BatchDimensions::operator<(const BatchDimensions& other) const {
  return std::tie(token_count, prefill_count, decode_count) <
         std::tie(other.token_count, other.prefill_count, other.decode_count);
}

std::string BatchDimensions::describe() const {
  return "(tokens " + std::to_string(token_count) + ", prefill " + std::to_string(prefill_count) + ", decode " +
         std::to_string(decode_count) + ")";
}

bool is_valid(const BatchDimensions& d, const BucketLimits& limits) {
  const int64_t per_decode = limits.speculative_tokens + 1;
  if (d.token_count <= 0 || d.prefill_count < 0 || d.decode_count < 0) return false;
  if (d.request_count() > limits.max_requests) return false;
  if (d.token_count < d.prefill_count + d.decode_count * per_decode) return false;
  return d.token_count <= d.prefill_count * limits.max_sequence_length + d.decode_count * per_decode;
}

std::vector<int64_t> cuda_graph_token_counts(int64_t tp, int64_t graphs, int64_t max_tokens,
                                             BucketDistribution distribution) {
  if (max_tokens < 1 || tp < 1) {
    throw ConfigError("the CUDA-graph token budget is " + std::to_string(max_tokens) +
                      "; fix: give a budget of at least one token");
  }
  if (distribution == BucketDistribution::kLinear) return linear_token_counts(tp, graphs, max_tokens);
  if (graphs == -1) {
    const auto log2 =
        static_cast<int64_t>(std::floor(std::log2(static_cast<double>(std::max<int64_t>(2, max_tokens)))));
    graphs = std::max<int64_t>(4, log2 + 2);
  }
  return exponential_token_counts(tp, graphs, max_tokens);
}

namespace {

void add_decode_buckets(const std::vector<int64_t>& decode_counts, const BucketLimits& limits,
                        std::vector<BatchDimensions>& buckets) {
  const int64_t per_decode = limits.speculative_tokens + 1;
  for (const int64_t count : decode_counts) {
    const int64_t requests = std::min(count / per_decode, limits.max_requests);
    const BatchDimensions bucket{round_down(requests * per_decode, limits.tensor_parallel_size), 0, requests};
    if (is_valid(bucket, limits)) buckets.push_back(bucket);
  }
}

void add_mixed_buckets(const std::vector<int64_t>& prefill_counts, const BucketLimits& limits,
                       std::vector<BatchDimensions>& buckets) {
  const int64_t requests = limits.max_requests;
  const int64_t per_decode = limits.speculative_tokens + 1;
  std::vector<int64_t> prefill_grid;
  int64_t prefill_floor = 1;
  if (limits.distribution == BucketDistribution::kExponential) {
    for (int64_t p = 1; p < requests; p *= 2) prefill_grid.push_back(p);
    prefill_grid.push_back(requests);
  } else {
    prefill_grid.push_back(std::min(*limits.mixed_prefill_count, requests));
    prefill_floor = *limits.mixed_prefill_count;
  }
  for (const int64_t count : prefill_counts) {
    if (count < 2 || count % limits.tensor_parallel_size != 0) continue;
    for (const int64_t prefill : prefill_grid) {
      const int64_t decode = std::max<int64_t>(0, std::min((count - prefill) / per_decode, requests - prefill));
      const BatchDimensions bucket{count, prefill, decode};
      if (is_valid(bucket, limits)) buckets.push_back(bucket);
    }
    const int64_t per_request = std::max<int64_t>(1, limits.max_sequence_length - 1);
    const int64_t least = std::max(prefill_floor, (count + per_request - 1) / per_request);
    if (least < requests) {
      const BatchDimensions bucket{count, std::max(least, std::min(requests, count)), 0};
      if (is_valid(bucket, limits)) buckets.push_back(bucket);
    }
  }
}

}  // namespace

std::vector<BatchDimensions> generate_buckets(int64_t graphs, const BucketLimits& limits) {
  if (graphs == 0) return {};
  const int64_t per_decode = limits.speculative_tokens + 1;
  int64_t budget = limits.cuda_graph_max_tokens.value_or(limits.max_tokens);
  if (budget > limits.max_tokens || budget <= 0) budget = limits.max_tokens;
  if (budget < limits.max_requests * per_decode) {
    throw ConfigError("[RT-14] the CUDA-graph token budget " + std::to_string(budget) + " is below max requests " +
                      std::to_string(limits.max_requests) + " x " + std::to_string(per_decode) +
                      " tokens per decode request; fix: raise the token budget or lower the request count");
  }
  if (graphs != -1) graphs = std::min(std::max<int64_t>(graphs, 1), budget);
  const int64_t tp = limits.tensor_parallel_size;
  const int64_t decode_budget = std::min(budget, limits.max_requests * per_decode);
  std::vector<int64_t> decode_counts = cuda_graph_token_counts(tp, graphs, decode_budget, limits.distribution);
  if (graphs == -1) {
    const int64_t unit = std::lcm(per_decode, tp);
    for (const int64_t floor : {unit, 2 * unit}) {
      if (floor <= decode_budget) decode_counts.push_back(floor);
    }
    decode_counts = descending_unique(decode_counts);
  }
  std::vector<BatchDimensions> buckets;
  const bool mixed = limits.mixed_prefill_count.value_or(0) > 0 && limits.use_non_decode_graphs;
  if (mixed) add_mixed_buckets(cuda_graph_token_counts(tp, graphs, budget, limits.distribution), limits, buckets);
  add_decode_buckets(decode_counts, limits, buckets);
  std::set<BatchDimensions> seen;
  std::vector<BatchDimensions> unique;
  for (const auto& bucket : buckets) {
    if (seen.insert(bucket).second) unique.push_back(bucket);
  }
  std::stable_sort(unique.begin(), unique.end(), [per_decode](const BatchDimensions& a, const BatchDimensions& b) {
    const int64_t prefill_a = a.token_count - a.decode_count * per_decode;
    const int64_t prefill_b = b.token_count - b.decode_count * per_decode;
    return std::tie(prefill_a, a.decode_count) > std::tie(prefill_b, b.decode_count);
  });
  return unique;
}

std::optional<BatchDimensions> match_bucket(const BatchDimensions& real, const std::vector<BatchDimensions>& buckets,
                                            bool strict) {
  std::optional<BatchDimensions> best;
  for (const auto& g : buckets) {
    bool fits = false;
    if (real.prefill_count == 0) {
      fits = g.token_count >= real.token_count && g.decode_count >= real.decode_count && g.prefill_count == 0;
    } else if (strict) {
      fits = g.token_count >= real.token_count && g.prefill_count >= real.prefill_count &&
             g.decode_count >= real.decode_count;
    } else {
      fits = g.token_count >= real.token_count && g.prefill_count >= real.prefill_count &&
             g.request_count() >= real.request_count();
    }
    if (fits && (!best || g < *best)) best = g;
  }
  return best;
}

}  // namespace graphed::infer
