// tests/infer/batch_buckets_test.cpp — Megatron's bucket generation and matching against the worked
// examples of research/megatron-cudagraphs.md §6.4–6.5.
#include "graphed/infer/batch_buckets.h"

#include <gtest/gtest.h>

#include "graphed/util/error.h"

namespace graphed::infer {
namespace {

using Counts = std::vector<int64_t>;

TEST(TokenCounts, Exponential) {
  const auto exponential = BucketDistribution::kExponential;
  EXPECT_EQ(cuda_graph_token_counts(1, 16, 512, exponential), (Counts{512, 256, 128, 64, 32, 16, 8, 4, 2, 1}));
  EXPECT_EQ(cuda_graph_token_counts(1, -1, 512, exponential), (Counts{512, 256, 128, 64, 32, 16, 8, 4, 2, 1}));
  EXPECT_EQ(cuda_graph_token_counts(1, 4, 512, exponential), (Counts{512, 256, 128, 1}));
  EXPECT_EQ(cuda_graph_token_counts(2, 8, 128, exponential), (Counts{128, 64, 32, 16, 8, 4, 2}));
  EXPECT_EQ(cuda_graph_token_counts(4, 8, 100, exponential), (Counts{100, 52, 24, 12, 8, 4}));
  EXPECT_EQ(cuda_graph_token_counts(1, 1, 7, exponential), (Counts{7}));
}

TEST(TokenCounts, Linear) {
  const auto linear = BucketDistribution::kLinear;
  EXPECT_EQ(cuda_graph_token_counts(1, 4, 512, linear), (Counts{512, 384, 256, 128}));
  const Counts automatic = cuda_graph_token_counts(1, -1, 300, linear);
  ASSERT_GE(automatic.size(), 8u);
  EXPECT_EQ(Counts(automatic.begin(), automatic.begin() + 5), (Counts{300, 288, 272, 256, 248}));
  EXPECT_EQ(Counts(automatic.end() - 5, automatic.end()), (Counts{16, 8, 4, 2, 1}));
}

TEST(TokenCounts, RefusesAnEmptyBudget) {
  EXPECT_THROW(cuda_graph_token_counts(1, 4, 0, BucketDistribution::kExponential), ConfigError);
}

TEST(GenerateBuckets, DecodeOnly) {
  BucketLimits limits;
  limits.max_requests = 8;
  limits.max_tokens = 512;
  limits.max_sequence_length = 256;
  const std::vector<BatchDimensions> expected{{8, 0, 8}, {4, 0, 4}, {2, 0, 2}, {1, 0, 1}};
  EXPECT_EQ(generate_buckets(4, limits), expected);
  EXPECT_TRUE(generate_buckets(0, limits).empty());
}

/// Research §6.4's mixed example: R = 8, T = 64, L = 256, mixed prefill on.
BucketLimits mixed_limits() {
  BucketLimits limits;
  limits.max_requests = 8;
  limits.max_tokens = 64;
  limits.max_sequence_length = 256;
  limits.mixed_prefill_count = 1;
  return limits;
}

TEST(GenerateBuckets, MixedGivesSixteen) {
  const auto buckets = generate_buckets(4, mixed_limits());
  ASSERT_EQ(buckets.size(), 16u);
  for (const int64_t tokens : {64, 32, 16}) {
    for (const auto& [prefill, decode] : std::vector<std::pair<int64_t, int64_t>>{{8, 0}, {4, 4}, {2, 6}, {1, 7}}) {
      const BatchDimensions want{tokens, prefill, decode};
      EXPECT_NE(std::find(buckets.begin(), buckets.end(), want), buckets.end()) << want.describe();
    }
  }
  EXPECT_EQ(buckets.front(), (BatchDimensions{64, 8, 0}));  // most prefill tokens first
  EXPECT_EQ(buckets.back(), (BatchDimensions{1, 0, 1}));
}

TEST(GenerateBuckets, RefusesABudgetBelowTheRequests) {
  BucketLimits limits;
  limits.max_requests = 8;
  limits.max_tokens = 4;  // 4 tokens cannot hold 8 decode requests
  try {
    generate_buckets(4, limits);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("RT-14"), std::string::npos) << error.what();
  }
}

TEST(MatchBucket, MegatronExamples) {
  const auto buckets = generate_buckets(4, mixed_limits());
  EXPECT_EQ(match_bucket({5, 1, 3}, buckets), (BatchDimensions{16, 1, 7}));
  EXPECT_EQ(match_bucket({3, 0, 3}, buckets), (BatchDimensions{4, 0, 4}));
  EXPECT_FALSE(match_bucket({70, 1, 0}, buckets).has_value());
  EXPECT_FALSE(match_bucket({1, 0, 1}, {}).has_value());
}

TEST(MatchBucket, StrictNeedsEveryComponent) {
  const std::vector<BatchDimensions> buckets{{16, 8, 0}, {16, 1, 7}};
  EXPECT_EQ(match_bucket({8, 2, 2}, buckets, /*strict=*/false), (BatchDimensions{16, 8, 0}));
  EXPECT_FALSE(match_bucket({8, 2, 2}, buckets, /*strict=*/true).has_value());
}

/// The request counts of the decode-only buckets for `graphs` graphs and at most `requests` requests.
Counts decode_counts(int64_t graphs, int64_t requests) {
  BucketLimits limits;
  limits.max_requests = requests;
  limits.max_tokens = requests;
  Counts counts;
  for (const auto& bucket : generate_buckets(graphs, limits)) counts.push_back(bucket.decode_count);
  return counts;
}

TEST(GenerateBuckets, DecodeOnlyBatchesArePowersOfTwoUpToTheRequests) {
  EXPECT_EQ(decode_counts(16, 32), (Counts{32, 16, 8, 4, 2, 1}));
  EXPECT_EQ(decode_counts(-1, 8), (Counts{8, 4, 2, 1}));
  EXPECT_EQ(decode_counts(2, 32), (Counts{32, 1}));
  EXPECT_EQ(decode_counts(16, 1), (Counts{1}));
  EXPECT_EQ(decode_counts(16, 6), (Counts{6, 2, 1}));  // halving 6 gives 3, which rounds down to 2
}

}  // namespace
}  // namespace graphed::infer
