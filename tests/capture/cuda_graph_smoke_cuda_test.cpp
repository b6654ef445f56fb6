// tests/capture/cuda_graph_smoke_cuda_test.cpp — proves the CUDA build chain end to end: capture a
// small graph through LibTorch's at::cuda::CUDAGraph, replay it on new inputs copied into its static
// buffers, and compare with eager. The capture engine itself (issue 4) gets its own tests.
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "cuda_test.h"

namespace graphed {
namespace {

using CudaGraphSmokeTest = graphed::testing::CudaTest;

at::Tensor mlp(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& w2) {
  return at::matmul(at::gelu(at::matmul(x, w1)), w2);  // [64, 128] -> [64, 256] -> [64, 128]
}

TEST_F(CudaGraphSmokeTest, ForwardReplayMatchesEager) {
  torch::manual_seed(0);
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  const at::Tensor w1 = torch::randn({128, 256}, options);
  const at::Tensor w2 = torch::randn({256, 128}, options);
  at::Tensor static_input = torch::randn({64, 128}, options);

  at::cuda::CUDAGraph graph;
  at::Tensor static_output;
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  {
    c10::cuda::CUDAStreamGuard guard(side);
    for (int i = 0; i < 3; ++i) mlp(static_input, w1, w2);  // warmup: cuBLAS handles, workspaces
    side.synchronize();
    graph.capture_begin();
    static_output = mlp(static_input, w1, w2);
    graph.capture_end();
  }
  torch::cuda::synchronize();

  for (int step = 0; step < 3; ++step) {
    const at::Tensor input = torch::randn({64, 128}, options);
    static_input.copy_(input);
    graph.replay();
    const at::Tensor expected = mlp(input, w1, w2);
    torch::cuda::synchronize();
    EXPECT_TRUE(torch::allclose(static_output, expected, 1e-5, 1e-5)) << "step " << step;
    EXPECT_TRUE(torch::equal(static_output, expected)) << "step " << step << ": replay is not bitwise eager";
  }
}

TEST_F(CudaGraphSmokeTest, ForwardBackwardReplayMatchesEagerGradients) {
  torch::manual_seed(1);
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  const at::Tensor w1 = torch::randn({128, 256}, options).requires_grad_(true);
  const at::Tensor w2 = torch::randn({256, 128}, options).requires_grad_(true);
  at::Tensor static_input = torch::randn({64, 128}, options);

  at::cuda::CUDAGraph graph;
  at::Tensor static_loss;
  std::vector<at::Tensor> static_grads;
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  {
    c10::cuda::CUDAStreamGuard guard(side);
    for (int i = 0; i < 3; ++i) {
      const at::Tensor loss = mlp(static_input, w1, w2).square().mean();
      torch::autograd::grad({loss}, {w1, w2});
    }
    side.synchronize();
    graph.capture_begin();
    static_loss = mlp(static_input, w1, w2).square().mean();
    static_grads = torch::autograd::grad({static_loss}, {w1, w2});
    graph.capture_end();
  }
  torch::cuda::synchronize();

  for (int step = 0; step < 3; ++step) {
    const at::Tensor input = torch::randn({64, 128}, options);
    static_input.copy_(input);
    graph.replay();
    const at::Tensor loss = mlp(input, w1, w2).square().mean();
    const auto grads = torch::autograd::grad({loss}, {w1, w2});
    torch::cuda::synchronize();
    EXPECT_TRUE(torch::equal(static_loss, loss)) << "step " << step;
    EXPECT_TRUE(torch::allclose(static_grads[0], grads[0], 1e-5, 1e-6)) << "step " << step;
    EXPECT_TRUE(torch::allclose(static_grads[1], grads[1], 1e-5, 1e-6)) << "step " << step;
  }
}

}  // namespace
}  // namespace graphed
