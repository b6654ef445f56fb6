// tests/capture/static_batch_buffer_test.cpp — static buffers keep their addresses, take new values,
// and reject a changed shape with a message; the CPU build refuses to capture with a clear error.
#include "graphed/capture/static_batch_buffer.h"

#include <gtest/gtest.h>

#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/full_iteration_graph.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"

namespace graphed::capture {
namespace {

TEST(StaticBatchBufferTest, FillsInPlaceAndKeepsAddresses) {
  StaticBatchBuffer buffer("training batches");
  const at::Device cpu(at::kCPU);
  buffer.fill_microbatch(0, {at::arange(4), at::ones({2, 2})}, cpu);
  buffer.fill_microbatch(1, {at::arange(4) * 2, at::ones({2, 2})}, cpu);
  const auto addresses = buffer.addresses();
  ASSERT_EQ(addresses.size(), 4u);
  buffer.fill_microbatch(0, {at::arange(4) + 10, at::zeros({2, 2})}, cpu);
  EXPECT_EQ(buffer.addresses(), addresses);
  EXPECT_TRUE(at::equal(buffer.microbatch(0)[0], at::arange(4) + 10));
  EXPECT_TRUE(at::equal(buffer.microbatch(1)[0], at::arange(4) * 2));
  EXPECT_EQ(buffer.bytes(), 2 * (4 * 8 + 4 * 4));
}

TEST(StaticBatchBufferTest, ChangedShapeIsRejected) {
  StaticBatchBuffer buffer("training batches");
  buffer.fill_microbatch(0, {at::zeros({8, 64}, at::kLong)}, at::Device(at::kCPU));
  try {
    buffer.fill_microbatch(0, {at::zeros({4, 64}, at::kLong)}, at::Device(at::kCPU));
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(),
                 "training batches: microbatch 0 input 0 is [4, 64] Long, but its static buffer is "
                 "[8, 64] Long (fixed at capture); fix: keep shapes static with CUDA graphs, or run "
                 "without them");
  }
}

TEST(FullIterationGraphTest, WarmupCallsRunEagerlyOnAnyBuild) {
  FullIterationGraphOptions options;
  options.warmup_steps = 2;
  FullIterationGraph graph(options, at::Device(at::kCPU));
  int runs = 0;
  const auto region = [&] {
    ++runs;
    return std::vector<at::Tensor>{at::ones({1}) * runs};
  };
  EXPECT_EQ(graph.run(region)[0].item<double>(), 1.0);
  EXPECT_EQ(graph.run(region)[0].item<double>(), 2.0);
  EXPECT_EQ(graph.calls(), 2);
  EXPECT_FALSE(graph.is_captured());
#if !GRAPHED_CUDA
  try {
    graph.run(region);  // the third call captures: impossible without CUDA
    FAIL() << "no error";
  } catch (const CaptureError& error) {
    EXPECT_STREQ(error.what(),
                 "cannot capture the full iteration: this binary was built against a CPU-only LibTorch "
                 "(GRAPHED_CUDA=0), which has no CUDA graphs; fix: run it without CUDA graphs, or build "
                 "on a GPU machine (scripts/gpu-check)");
  }
#endif
}

}  // namespace
}  // namespace graphed::capture
