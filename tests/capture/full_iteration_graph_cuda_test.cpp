// tests/capture/full_iteration_graph_cuda_test.cpp — the engine on toy regions (no model code):
// warmup/capture/replay by call count, replays equal eager, a training step with backward and an
// in-place update bitwise equal to eager, dropout masks differ per replay, memory returns after
// reset, re-capture works, and a planted .item() yields the diagnosis instead of a crash or hang.
#include "graphed/capture/full_iteration_graph.h"

#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include "cuda_test.h"
#include "graphed/runtime/device.h"
#include "graphed/util/error.h"

namespace graphed::capture {
namespace {

class FullIterationGraphCudaTest : public graphed::testing::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    stream_ = std::make_unique<SideStream>(device_);
  }
  at::Device device_{at::kCUDA, 0};
  std::unique_ptr<SideStream> stream_;
};

TEST_F(FullIterationGraphCudaTest, WarmsUpCapturesThenReplaysWithNewInputs) {
  SideStream::Use use(*stream_);
  at::manual_seed(0);
  const auto options = at::TensorOptions().device(device_);
  const at::Tensor w = at::randn({32, 32}, options);
  const at::Tensor x = at::randn({8, 32}, options);  // the static input
  FullIterationGraphOptions graph_options;
  graph_options.warmup_steps = 2;
  FullIterationGraph graph(graph_options, device_);
  const auto region = [&] { return std::vector<at::Tensor>{at::relu(at::matmul(x, w))}; };
  std::vector<const void*> output_addresses;
  for (int call = 0; call < 6; ++call) {
    const at::Tensor input = at::randn({8, 32}, options);
    x.copy_(input);
    const auto outputs = graph.run(region);
    EXPECT_TRUE(at::equal(outputs[0], at::relu(at::matmul(input, w)))) << "call " << call;
    EXPECT_EQ(graph.is_captured(), call >= 2);
    if (call >= 2) output_addresses.push_back(outputs[0].data_ptr());
  }
  EXPECT_EQ(graph.calls(), 6);
  for (const void* address : output_addresses) EXPECT_EQ(address, output_addresses.front()) << "static outputs";
  EXPECT_GT(graph.capture_seconds(), 0.0);
}

TEST_F(FullIterationGraphCudaTest, TrainingStepMatchesEagerBitwise) {
  at::manual_seed(1);
  const auto options = at::TensorOptions().device(device_);
  const at::Tensor start = at::randn({64, 16}, options);
  const at::Tensor data = at::randn({20, 32, 64}, options);
  const auto train = [&](bool graphed) {
    SideStream::Use use(*stream_);
    at::Tensor w = start.clone().requires_grad_(true);
    const at::Tensor x = at::empty({32, 64}, options);
    FullIterationGraphOptions graph_options;
    graph_options.warmup_steps = 3;
    FullIterationGraph graph(graph_options, device_);
    const auto region = [&] {
      const at::Tensor loss = at::tanh(at::matmul(x, w)).pow(2).mean();
      const auto grad = torch::autograd::grad({loss}, {w})[0];
      {
        at::NoGradGuard no_grad;
        w.sub_(grad * 0.5);
      }
      return std::vector<at::Tensor>{loss.detach()};
    };
    std::vector<double> losses;
    for (int step = 0; step < 20; ++step) {
      x.copy_(data[step]);
      losses.push_back((graphed ? graph.run(region) : region())[0].item<double>());
    }
    return std::make_pair(losses, w.detach().clone());
  };
  const auto eager = train(false);
  const auto graphed = train(true);
  EXPECT_EQ(graphed.first, eager.first);
  EXPECT_TRUE(at::equal(graphed.second, eager.second));
}

TEST_F(FullIterationGraphCudaTest, DropoutMasksDifferBetweenReplays) {
  SideStream::Use use(*stream_);
  const at::Tensor ones = at::ones({4096}, at::TensorOptions().device(device_));
  FullIterationGraphOptions graph_options;
  graph_options.warmup_steps = 1;
  FullIterationGraph graph(graph_options, device_);
  const auto region = [&] { return std::vector<at::Tensor>{at::dropout(ones, 0.5, /*train=*/true)}; };
  graph.run(region);
  const at::Tensor first = graph.run(region)[0].clone();
  const at::Tensor second = graph.run(region)[0].clone();
  EXPECT_TRUE(graph.is_captured());
  EXPECT_FALSE(at::equal(first, second)) << "each replay must draw a new mask";
  EXPECT_NEAR(first.eq(0).to(at::kFloat).mean().item<double>(), 0.5, 0.05);
}

TEST_F(FullIterationGraphCudaTest, MemoryReturnsAfterResetAndRecaptureWorks) {
  const auto options = at::TensorOptions().device(device_);
  const at::Tensor w = at::randn({256, 256}, options);
  const at::Tensor x = at::randn({256, 256}, options);
  {
    SideStream::Use use(*stream_);
    at::matmul(x, w);  // the side stream's first matmul allocates its cuBLAS workspace, which is not graph memory
  }
  runtime::synchronize(device_);
  runtime::empty_cache(device_);
  const int64_t before = runtime::allocated_memory_bytes(device_);
  {
    SideStream::Use use(*stream_);
    FullIterationGraphOptions graph_options;
    graph_options.warmup_steps = 1;
    FullIterationGraph graph(graph_options, device_, GraphPool::create());
    const auto region = [&] { return std::vector<at::Tensor>{at::matmul(at::matmul(x, w), w)}; };
    graph.run(region);
    graph.run(region);  // capture
    EXPECT_TRUE(graph.is_captured());
    EXPECT_GT(runtime::allocated_memory_bytes(device_), before);
    graph.reset();
    EXPECT_FALSE(graph.is_captured());
    EXPECT_EQ(graph.calls(), 0);
    graph.run(region);
    const auto again = graph.run(region);  // captured again after the reset
    EXPECT_TRUE(graph.is_captured());
    EXPECT_TRUE(at::allclose(again[0], at::matmul(at::matmul(x, w), w)));
    graph.reset();
  }
  runtime::synchronize(device_);
  runtime::empty_cache(device_);
  EXPECT_EQ(runtime::allocated_memory_bytes(device_), before) << "graph memory must be freed by reset";
}

TEST_F(FullIterationGraphCudaTest, PlantedItemYieldsTheDiagnosis) {
  SideStream::Use use(*stream_);
  const at::Tensor x = at::ones({16}, at::TensorOptions().device(device_));
  FullIterationGraphOptions graph_options;
  graph_options.warmup_steps = 1;
  graph_options.name = "the planted step";
  FullIterationGraph graph(graph_options, device_);
  const auto region = [&] {
    const double total = (x * 2).sum().item<double>();  // a host sync: illegal inside a capture
    return std::vector<at::Tensor>{x * total};
  };
  graph.run(region);
  try {
    graph.run(region);
    FAIL() << "capturing a host sync must fail";
  } catch (const CaptureError& error) {
    EXPECT_EQ(
        error.cause().rfind("capturing the planted step failed: a host synchronization inside the captured region", 0),
        0u)
        << error.what();
    EXPECT_NE(error.fix().find("without CUDA graphs"), std::string::npos);
  }
  EXPECT_FALSE(graph.is_captured());
}

}  // namespace
}  // namespace graphed::capture
