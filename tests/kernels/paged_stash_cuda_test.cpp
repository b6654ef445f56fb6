// tests/kernels/paged_stash_cuda_test.cpp — the paged stash on the GPU: the real rows of bf16 and fp32 tensors come
// back as they went (the rest zero) with nothing read on the host, and a CUDA graph that parks and takes back, captured
// once, replays for other real-row counts (and a full pool) what eager puts and takes give.
#include <gtest/gtest.h>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda_test.h"
#include "graphed/kernels/paged_stash.h"

namespace graphed::kernels {
namespace {

class PagedStashCudaTest : public graphed::testing::CudaTest {};

const auto kCuda = at::TensorOptions().device(at::kCUDA);

at::Tensor real_rows_only(const at::Tensor& tensor, int64_t real) {
  at::Tensor expected = at::zeros_like(tensor);
  expected.narrow(0, 0, real).copy_(tensor.narrow(0, 0, real));
  return expected;
}

/// A stash of pages of 16 rows sized for two puts of 100 balanced rows alive at once.
PagedStash sized_stash(const at::Tensor& first, const at::Tensor& second) {
  PagedStash stash(PagedStashOptions{16, 1.0});
  const at::Tensor rows = at::full({}, 100, kCuda.dtype(at::kLong));
  const StashedRows a = stash.put({first, second}, rows, 100);
  const StashedRows b = stash.put({first, second}, rows, 100);
  stash.take(b);
  stash.take(a);
  stash.begin_iteration();
  return stash;
}

TEST_F(PagedStashCudaTest, RealRowsComeBackAsTheyWent) {
  const at::Tensor first = at::randn({300, 64}, kCuda.dtype(at::kBFloat16));
  const at::Tensor second = at::randn({300, 24}, kCuda);
  PagedStash stash = sized_stash(first, second);
  EXPECT_EQ(stash.pool_bytes(), ((200 / 16 + 1 + 2) * 16 + 16 + 1) * (64 * 2 + 24 * 4));
  const StashedRows parked = stash.put({first, second}, at::full({}, 77, kCuda.dtype(at::kLong)), 100);
  const StashedRows more = stash.put({second, first}, at::full({}, 120, kCuda.dtype(at::kLong)), 100);
  const auto back_more = stash.take(more);
  const auto back = stash.take(parked);
  EXPECT_TRUE(at::equal(back[0], real_rows_only(first, 77)));
  EXPECT_TRUE(at::equal(back[1], real_rows_only(second, 77)));
  EXPECT_TRUE(at::equal(back_more[0], real_rows_only(second, 120)));
  EXPECT_TRUE(at::equal(back_more[1], real_rows_only(first, 120)));
  EXPECT_EQ(stash.overflowed().item<int64_t>(), 0);
}

TEST_F(PagedStashCudaTest, AGraphReplaysOtherRealRowCountsAsEagerCallsDo) {
  const at::Tensor first = at::randn({300, 64}, kCuda.dtype(at::kBFloat16));
  const at::Tensor second = at::randn({300, 24}, kCuda);
  PagedStash stash = sized_stash(first, second);  // 15 pages of 16 rows
  const at::Tensor rows_a = at::full({}, 90, kCuda.dtype(at::kLong));
  const at::Tensor rows_b = at::full({}, 110, kCuda.dtype(at::kLong));
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(stream);
  // Warm up on the capturing stream, then capture two layers' puts and their takes in reverse.
  stash.take(stash.put({first, second}, rows_a, 100));
  stream.synchronize();
  at::cuda::CUDAGraph graph;
  std::vector<at::Tensor> back_a, back_b;
  graph.capture_begin();
  const StashedRows a = stash.put({first, second}, rows_a, 100);
  const StashedRows b = stash.put({second, first}, rows_b, 100);
  back_b = stash.take(b);
  back_a = stash.take(a);
  graph.capture_end();
  // (real rows a, real rows b, whether 15 pages hold them)
  const std::vector<std::tuple<int64_t, int64_t, bool>> cases = {
      {90, 110, true}, {0, 240, true}, {240, 0, true}, {160, 100, false}, {17, 33, true}};
  for (const auto& [count_a, count_b, fits] : cases) {
    const std::string what = std::to_string(count_a) + " and " + std::to_string(count_b) + " rows";
    stash.begin_iteration();
    rows_a.fill_(count_a);
    rows_b.fill_(count_b);
    graph.replay();
    stream.synchronize();
    EXPECT_EQ(stash.overflowed().item<int64_t>(), fits ? 0 : 1) << what;
    if (!fits) continue;
    EXPECT_TRUE(at::equal(back_a[0], real_rows_only(first, count_a))) << what;
    EXPECT_TRUE(at::equal(back_a[1], real_rows_only(second, count_a))) << what;
    EXPECT_TRUE(at::equal(back_b[0], real_rows_only(second, count_b))) << what;
    EXPECT_TRUE(at::equal(back_b[1], real_rows_only(first, count_b))) << what;
  }
}

}  // namespace
}  // namespace graphed::kernels
