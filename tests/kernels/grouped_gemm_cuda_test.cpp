// tests/kernels/grouped_gemm_cuda_test.cpp — grouped_matmul (kernels/grouped_gemm.h, or LibTorch's at::_grouped_mm
// for aligned bf16 on Hopper) against the reference (a float64 matmul per expert): which path each case takes;
// fp32, bf16 and fp16, depths and widths that are not multiples of the 64 x 64 tile,
// experts with no rows and one with most; the input's and the weights' gradients; the same bits on every run; and a
// CUDA graph captured once replaying for other routings (other offsets) the same bits as eager launches; and
// grouped_matmul_backward on its own (each expert's bias is tests/kernels/moe_routing_cuda_test.cpp's).
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda_test.h"
#include "graphed/kernels/grouped_gemm_ops.h"

namespace graphed::kernels {
namespace {

class GroupedGemmCudaTest : public graphed::testing::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    at::manual_seed(21);
  }
};

/// Offsets [E + 1] on the GPU: expert e gets counts[e] rows.
at::Tensor offsets_of(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets = {0};
  for (int64_t count : counts) offsets.push_back(offsets.back() + count);
  return at::tensor(offsets, at::kLong).to(at::kCUDA);
}

void expect_close(const at::Tensor& got, const at::Tensor& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double largest = want.abs().max().item<double>();
  const double difference = (got.to(at::kDouble) - want).abs().max().item<double>();
  EXPECT_LE(difference, tolerance * std::max(largest, 1.0)) << what << ": difference " << difference;
}

struct Products {
  at::Tensor out, grad_input, grad_weight;
};

Products run(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& offsets, const at::Tensor& upstream,
             bool reference_path) {
  const at::Tensor x = input.detach().requires_grad_(true);
  const at::Tensor w = weight.detach().requires_grad_(true);
  const at::Tensor out = reference_path ? reference::grouped_matmul(x, w, offsets) : grouped_matmul(x, w, offsets);
  const auto grads = torch::autograd::grad({(out * upstream.to(out.scalar_type())).sum()}, {x, w});
  return {out.detach(), grads[0], grads[1]};
}

// Aligned bf16 goes to at::_grouped_mm on compute capability 9 and 10; fp32, fp16 and rows that are not whole
// 16-byte units go to graphed's kernel (both are checked against the reference below).
TEST_F(GroupedGemmCudaTest, TheLibraryTakesAlignedBf16OnHopperAndBlackwell) {
  const int major = at::cuda::getCurrentDeviceProperties()->major;
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const bool library = uses_library_grouped_mm(at::zeros({4, 40}, bf16), at::zeros({2, 40, 72}, bf16));
  EXPECT_EQ(library, major == 9 || major == 10) << "compute capability " << major;
  EXPECT_FALSE(uses_library_grouped_mm(at::zeros({4, 100}, bf16), at::zeros({2, 100, 30}, bf16)));
  EXPECT_FALSE(uses_library_grouped_mm(at::zeros({4, 40}, bf16.dtype(at::kFloat)),
                                       at::zeros({2, 40, 72}, bf16.dtype(at::kFloat))));
  std::printf("compute capability %d: aligned bf16 through %s\n", major,
              library ? "at::_grouped_mm" : "graphed's kernel");
}

TEST_F(GroupedGemmCudaTest, MatchesTheReferenceForEveryTypeAndShape) {
  struct Shape {
    std::vector<int64_t> counts;
    int64_t depth, columns;
  };
  const std::vector<Shape> shapes = {
      {{70, 0, 130, 1, 55}, 40, 72}, {{0, 0, 256, 0}, 256, 512}, {{3, 9, 0, 17, 64, 65, 1, 33}, 100, 30}};
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (const Shape& shape : shapes) {
      const std::string what = std::string(c10::toString(type)) + " depth " + std::to_string(shape.depth) +
                               " columns " + std::to_string(shape.columns);
      const at::Tensor offsets = offsets_of(shape.counts);
      const int64_t rows = offsets[-1].item<int64_t>();
      const int64_t experts = static_cast<int64_t>(shape.counts.size());
      const auto options = at::TensorOptions().device(at::kCUDA).dtype(type);
      const at::Tensor input = at::randn({rows, shape.depth}, options);
      const at::Tensor weight = at::randn({experts, shape.depth, shape.columns}, options) * 0.1;
      const at::Tensor upstream = at::randn({rows, shape.columns}, options);
      const Products got = run(input, weight, offsets, upstream, false);
      const Products want = run(input.to(at::kDouble), weight.to(at::kDouble), offsets, upstream.to(at::kDouble), true);
      const double tolerance = type == at::kFloat ? 1e-5 : 2e-2;
      expect_close(got.out, want.out, tolerance, what + " out");
      expect_close(got.grad_input, want.grad_input, tolerance, what + " input gradient");
      expect_close(got.grad_weight, want.grad_weight, tolerance, what + " weight gradient");
      for (int64_t expert = 0; expert < experts; ++expert) {
        if (shape.counts[static_cast<std::size_t>(expert)] == 0) {
          EXPECT_EQ(got.grad_weight[expert].abs().max().item<double>(), 0.0) << what << " expert " << expert;
        }
      }
      const Products again = run(input, weight, offsets, upstream, false);
      EXPECT_TRUE(at::equal(got.out, again.out) && at::equal(got.grad_input, again.grad_input) &&
                  at::equal(got.grad_weight, again.grad_weight))
          << what << ": not the same bits on a second run";
    }
  }
}

// grouped_matmul_backward (what the paged stash's experts run, model/paged_experts.h) gives autograd's gradients of
// grouped_matmul on the same tensors: through the library for aligned bf16 and through graphed's kernels for fp32.
// Bitwise where both run the same products; the library's is reported (its autograd may order them otherwise).
TEST_F(GroupedGemmCudaTest, TheBackwardOnItsOwnGivesAutogradsGradients) {
  for (const at::ScalarType type : {at::kBFloat16, at::kFloat}) {
    const auto options = at::TensorOptions().device(at::kCUDA).dtype(type);
    const at::Tensor offsets = offsets_of({70, 0, 130, 1, 55});
    const at::Tensor input = at::randn({256, 40}, options);
    const at::Tensor weight = at::randn({5, 40, 72}, options) * 0.1;
    const at::Tensor upstream = at::randn({256, 72}, options);
    const Products want = run(input, weight, offsets, upstream, false);
    const GroupedMatmulGrads got = grouped_matmul_backward(upstream, input, weight, offsets);
    const std::string what = c10::toString(type);
    const bool input_equal = at::equal(got.input, want.grad_input);
    const bool weight_equal = at::equal(got.weight, want.grad_weight);
    std::printf("%s (%s): input gradient %s, weight gradient %s\n", what.c_str(),
                uses_library_grouped_mm(input, weight) ? "at::_grouped_mm" : "graphed's kernel",
                input_equal ? "bitwise equal" : "differs", weight_equal ? "bitwise equal" : "differs");
    const double tolerance = type == at::kFloat ? 1e-6 : 1e-2;
    expect_close(got.input, want.grad_input.to(at::kDouble), tolerance, what + " input gradient");
    expect_close(got.weight, want.grad_weight.to(at::kDouble), tolerance, what + " weight gradient");
    EXPECT_EQ(got.weight[1].abs().max().item<double>(), 0.0) << what << ": the expert without rows";
    if (type == at::kFloat) EXPECT_TRUE(input_equal && weight_equal) << "the same kernels give the same bits";
  }
}

TEST_F(GroupedGemmCudaTest, AGraphReplaysOtherRoutingsAsEagerLaunchesDo) {
  const auto options = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const int64_t rows = 300, depth = 128, columns = 96;
  const at::Tensor input = at::randn({rows, depth}, options);
  const at::Tensor weight = at::randn({6, depth, columns}, options);
  const at::Tensor upstream = at::randn({rows, columns}, options);
  at::Tensor offsets = offsets_of({50, 50, 50, 50, 50, 50});
  const at::Tensor x = input.detach().requires_grad_(true);
  const at::Tensor w = weight.detach().requires_grad_(true);
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  at::Tensor out, grad_input, grad_weight;
  {
    c10::cuda::CUDAStreamGuard guard(stream);
    run(input, weight, offsets, upstream, false);  // warm up on the capturing stream
    stream.synchronize();
    at::cuda::CUDAGraph graph;
    graph.capture_begin();
    out = grouped_matmul(x, w, offsets);
    const auto grads = torch::autograd::grad({(out * upstream).sum()}, {x, w});
    grad_input = grads[0];
    grad_weight = grads[1];
    graph.capture_end();
    for (const std::vector<int64_t>& counts :
         std::vector<std::vector<int64_t>>{{300, 0, 0, 0, 0, 0}, {0, 1, 2, 3, 4, 290}, {64, 0, 128, 0, 100, 8}}) {
      offsets.copy_(offsets_of(counts));
      graph.replay();
      stream.synchronize();
      const Products eager = run(input, weight, offsets, upstream, false);
      stream.synchronize();
      EXPECT_TRUE(at::equal(out, eager.out) && at::equal(grad_input, eager.grad_input) &&
                  at::equal(grad_weight, eager.grad_weight))
          << "counts " << counts[0] << ", " << counts[1] << ", ...";
    }
  }
}

}  // namespace
}  // namespace graphed::kernels
