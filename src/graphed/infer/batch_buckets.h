// infer/batch_buckets.h — Megatron's inference CUDA-graph buckets (research §6.3–6.5): which batch
// dimensions get a graph (generate_cuda_graph_batch_dimensions_list) and which graph serves a real
// batch (match_graph_config). Plain integers, no torch: the serving engine pads a step to its bucket.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace graphed::infer {

/// One step's shape: tokens, prefill requests, decode requests (Megatron's InferenceBatchDimensions).
/// Ordered lexicographically in that order.
struct BatchDimensions {
  int64_t token_count = 0;
  int64_t prefill_count = 0;
  int64_t decode_count = 0;

  int64_t request_count() const { return prefill_count + decode_count; }
  bool operator==(const BatchDimensions& other) const;
  bool operator<(const BatchDimensions& other) const;
  /// "(tokens 16, prefill 1, decode 7)"
  std::string describe() const;
};

/// How bucket token counts are spread between the smallest and the largest.
enum class BucketDistribution { kExponential, kLinear };

/// The limits buckets are generated within.
struct BucketLimits {
  int64_t tensor_parallel_size = 1;
  int64_t max_requests = 1;                      ///< R: requests in one step
  int64_t max_tokens = 1;                        ///< tokens in one step
  int64_t max_sequence_length = 1;               ///< L
  int64_t speculative_tokens = 0;                ///< s
  std::optional<int64_t> cuda_graph_max_tokens;  ///< T; unset = max_tokens
  std::optional<int64_t> mixed_prefill_count;    ///< unset or <= 0: decode-only buckets
  bool use_non_decode_graphs = true;
  BucketDistribution distribution = BucketDistribution::kExponential;
};

/// Whether `dimensions` can occur under the limits (tokens > 0, requests <= R, tokens between
/// P + D(s+1) and P L + D(s+1)).
bool is_valid(const BatchDimensions& dimensions, const BucketLimits& limits);

/// The graph token counts for N graphs (-1 = automatic) up to T, largest first (Megatron's
/// _calculate_cuda_graph_token_counts). Throws ConfigError when T < 1.
std::vector<int64_t> cuda_graph_token_counts(int64_t tensor_parallel_size, int64_t num_cuda_graphs, int64_t max_tokens,
                                             BucketDistribution distribution);

/// The buckets for num_cuda_graphs graphs (-1 = automatic; 0 = none), sorted as Megatron sorts them:
/// descending by prefill tokens, then decode requests. Throws ConfigError (rule RT-14) when the
/// graph token budget is below R (s + 1).
std::vector<BatchDimensions> generate_buckets(int64_t num_cuda_graphs, const BucketLimits& limits);

/// The smallest bucket (lexicographically) that can serve `real`, or nullopt (run eagerly). strict:
/// every component must fit (hybrid / Mamba models); otherwise prefill slots may hold decode requests.
std::optional<BatchDimensions> match_bucket(const BatchDimensions& real, const std::vector<BatchDimensions>& buckets,
                                            bool strict = false);

}  // namespace graphed::infer
