// tests/train/memory_estimate_test.cpp — a micro batch far too large for the machine is refused before
// the run with the estimate and a size that fits; one close to the limit is warned about; a tensor-parallel
// rank is estimated at its share.
#include "graphed/train/memory_estimate.h"

#include <gtest/gtest.h>

#include "graphed/config/presets.h"
#include "graphed/util/error.h"

namespace graphed::train {
namespace {

config::RunConfig tiny(int64_t micro_batch_size) {
  config::Settings settings;
  config::apply_settings(settings, *config::preset_settings("tiny"), "preset tiny");
  settings.train.micro_batch_size = micro_batch_size;
  return config::resolve_run_config_or_throw(settings);
}

constexpr int64_t kGiB = 1024LL * 1024 * 1024;

TEST(MemoryEstimateTest, GrowsWithTheMicroBatch) {
  const MemoryEstimate one = estimate_training_memory(tiny(1), false);
  const MemoryEstimate many = estimate_training_memory(tiny(1000), false);
  EXPECT_EQ(one.activation_bytes_per_sample, many.activation_bytes_per_sample);
  EXPECT_EQ(many.total_bytes() - one.total_bytes(), 999 * one.activation_bytes_per_sample);
  // tiny: 2 x 64 x (10 x 128 + 2 x 512) + 2 x 2 x 2 x 64^2 elements of layers, 3 x 64 x 1024 of logits, 4 bytes each.
  EXPECT_EQ(one.activation_bytes_per_sample, 4 * (2 * (64 * (10 * 128 + 2 * 512) + 2 * 2 * 64 * 64) + 3 * 64 * 1024));
}

TEST(MemoryEstimateTest, Bf16AutocastHalvesTheLayersButNotTheLogits) {
  const MemoryEstimate fp32 = estimate_training_memory(tiny(1), false);
  const MemoryEstimate bf16 = estimate_training_memory(tiny(1), true);
  EXPECT_EQ(fp32.activation_bytes_per_sample - bf16.activation_bytes_per_sample,
            2 * 2 * (64 * (10 * 128 + 2 * 512) + 2 * 2 * 64 * 64));
}

TEST(MemoryEstimateTest, EachTensorParallelRankHoldsItsShare) {
  const config::RunConfig whole = tiny(8);
  config::RunConfig split = whole;
  split.train.tensor_model_parallel_size = 2;
  const MemoryEstimate one = estimate_training_memory(whole, true);
  const MemoryEstimate half = estimate_training_memory(split, true);
  EXPECT_EQ(half.state_bytes, one.state_bytes / 2);
  EXPECT_EQ(half.activation_bytes_per_sample, one.activation_bytes_per_sample / 2);
}

TEST(MemoryEstimateTest, TheDistributedOptimizerKeepsAShareOfTheState) {
  const config::RunConfig whole = tiny(8);
  config::RunConfig sharded = whole;
  sharded.train.use_distributed_optimizer = true;
  sharded.train.data_parallel_size = 4;
  const MemoryEstimate one = estimate_training_memory(whole, true);
  const MemoryEstimate quarter = estimate_training_memory(sharded, true);
  // 16 bytes a parameter against 4 (gradients) + 12 / 4 (parameters and moments).
  EXPECT_NEAR(static_cast<double>(quarter.state_bytes), static_cast<double>(one.state_bytes) * 7.0 / 16.0, 2.0);
  EXPECT_EQ(quarter.activation_bytes_per_sample, one.activation_bytes_per_sample);
}

TEST(MemoryEstimateTest, AMicroBatchFarTooLargeIsRefusedWithAFittingSize) {
  std::string message;
  try {
    check_memory_fits(tiny(100000), false, 24 * kGiB, "this machine (host memory)");
  } catch (const DataError& error) {
    message = error.what();
  }
  EXPECT_EQ(message,
            "this run needs about 195.3 GiB (2.0 MiB of activations per sample x --micro-batch-size 100000, "
            "plus 8.0 MiB of parameters, gradients and AdamW state), more than the 24.0 GiB available on this "
            "machine (host memory); fix: lower --micro-batch-size to 9826 or less (raise --global-batch-size "
            "to keep the tokens per iteration: the microbatches then run one after another), or shorten "
            "--seq-length");
}

TEST(MemoryEstimateTest, NearTheLimitWarnsAndFarBelowIsQuiet) {
  EXPECT_FALSE(check_memory_fits(tiny(1), false, 24 * kGiB, "cpu"));
  const auto warning = check_memory_fits(tiny(11000), false, 24 * kGiB, "cpu");
  ASSERT_TRUE(warning);
  EXPECT_EQ(warning->rfind("this run needs about 21.5 GiB (2.0 MiB of activations per sample x --micro-batch-size "
                           "11000, plus 8.0 MiB",
                           0),
            0u)
      << *warning;
  EXPECT_NE(
      warning->find(
          "more than 80% of the 24.0 GiB available on cpu; it may run out of memory: lower --micro-batch-size to 9826"),
      std::string::npos)
      << *warning;
}

}  // namespace
}  // namespace graphed::train
