// tests/dist/tensor_collectives_test.cpp — the model's tensor-parallel collectives over a real Gloo group:
// two ranks as threads of this process, meeting through one in-memory store. The sum, the gather in rank
// order and the reduce-scatter, the caller's tensor untouched, and Megatron's copy/reduce regions carried
// by them (a column- then row-parallel linear pair equals one process, forward and backward); and the group's
// element-wise max, which FP8 amaxes take. Skipped where this build has no Gloo.
#include "graphed/dist/tensor_collectives.h"

#include "graphed/dist/peer_collectives.h"

#include <chrono>
#include <functional>
#include <vector>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "graphed/dist/detail/backend.h"
#include "ranks_on_threads.h"

namespace graphed::dist {
namespace {

const auto kDoubleOptions = at::TensorOptions().dtype(at::kDouble);

/// Runs `body(collectives)` as 2 Gloo ranks on threads; rethrows the first failure.
void on_two_ranks(const std::function<void(model::TensorCollectives&)>& body) {
  const auto store = c10::make_intrusive<c10d::HashStore>();
  testing::run_ranks_on_threads(2, [&](int64_t rank) {
    auto backend = detail::make_gloo_backend(store, rank, 2, std::chrono::seconds(30), "127.0.0.1");
    Communicator group(backend, "tensor-parallel", {0, 1}, rank);
    GroupTensorCollectives collectives(group);
    body(collectives);
  });
}

class TensorCollectivesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!detail::gloo_available()) GTEST_SKIP() << "this build has no Gloo";
  }
};

TEST_F(TensorCollectivesTest, SumsAndGathersInRankOrderWithoutTouchingTheInput) {
  on_two_ranks([](model::TensorCollectives& collectives) {
    const int64_t rank = collectives.rank();
    EXPECT_EQ(collectives.size(), 2);
    const at::Tensor mine = at::full({2, 3}, static_cast<double>(rank + 1), kDoubleOptions);
    EXPECT_TRUE(at::equal(collectives.all_reduce_sum(mine), at::full({2, 3}, 3.0, kDoubleOptions)));
    EXPECT_TRUE(at::equal(mine, at::full({2, 3}, static_cast<double>(rank + 1), kDoubleOptions)))
        << "the input is untouched";
    const at::Tensor gathered = collectives.all_gather(mine, 1);
    EXPECT_TRUE(at::equal(gathered,
                          at::cat({at::full({2, 3}, 1.0, kDoubleOptions), at::full({2, 3}, 2.0, kDoubleOptions)}, 1)));
  });
}

TEST_F(TensorCollectivesTest, InferenceCollectivesOnTheCpuAreTheGroupsOwn) {
  // No peer memory on a CPU device (or a CPU build): the engine's sums take the group's all-reduce.
  const auto store = c10::make_intrusive<c10d::HashStore>();
  testing::run_ranks_on_threads(2, [&](int64_t rank) {
    Communicator group(detail::make_gloo_backend(store, rank, 2, std::chrono::seconds(30), "127.0.0.1"),
                       "tensor-parallel", {0, 1}, rank);
    const auto collectives = make_inference_collectives(group, at::Device(at::kCPU), /*use_peer_memory=*/true);
    EXPECT_NE(std::dynamic_pointer_cast<GroupTensorCollectives>(collectives), nullptr) << "rank " << rank;
    const at::Tensor mine = at::full({4}, static_cast<double>(rank + 1), kDoubleOptions);
    EXPECT_TRUE(at::equal(collectives->all_reduce_sum(mine), at::full({4}, 3.0, kDoubleOptions))) << "rank " << rank;
  });
}

TEST_F(TensorCollectivesTest, TheGroupsMaxIsElementWiseAndInPlace) {
  const auto store = c10::make_intrusive<c10d::HashStore>();
  testing::run_ranks_on_threads(2, [&](int64_t rank) {
    Communicator group(detail::make_gloo_backend(store, rank, 2, std::chrono::seconds(30), "127.0.0.1"),
                       "data-parallel", {0, 1}, rank);
    // rank 0 holds [3, 0, 5], rank 1 [1, 4, 5]: each element's larger value, the tensor itself updated
    at::Tensor amaxes = rank == 0 ? at::tensor({3.0f, 0.0f, 5.0f}) : at::tensor({1.0f, 4.0f, 5.0f});
    const void* address = amaxes.data_ptr();
    group.all_reduce_max(amaxes).wait();
    EXPECT_TRUE(at::equal(amaxes, at::tensor({3.0f, 4.0f, 5.0f}))) << "rank " << rank;
    EXPECT_EQ(amaxes.data_ptr(), address);
  });
}

TEST_F(TensorCollectivesTest, ReduceScatterKeepsEachRanksPartOfTheSumAlongAnyDimension) {
  on_two_ranks([](model::TensorCollectives& collectives) {
    const int64_t rank = collectives.rank();
    // rank r holds (r + 1) x [0, 1, ..., 23] as [2, 4, 3]; the sum is 3 x that.
    const at::Tensor mine = at::arange(24, kDoubleOptions).view({2, 4, 3}) * static_cast<double>(rank + 1);
    const at::Tensor sum = at::arange(24, kDoubleOptions).view({2, 4, 3}) * 3.0;
    EXPECT_TRUE(at::equal(collectives.reduce_scatter_sum(mine, 1), sum.narrow(1, rank * 2, 2))) << "rank " << rank;
    EXPECT_TRUE(at::equal(collectives.reduce_scatter_sum(mine, 0), sum.narrow(0, rank, 1))) << "rank " << rank;
  });
}

TEST_F(TensorCollectivesTest, CarryTheTensorParallelRegionsOfALinearPair) {
  at::manual_seed(7);
  const at::Tensor input = at::randn({4, 6}, kDoubleOptions);
  const at::Tensor first = at::randn({8, 6}, kDoubleOptions), second = at::randn({5, 8}, kDoubleOptions);
  const at::Tensor x = input.clone().requires_grad_(true);
  const at::Tensor whole = at::linear(at::tanh(at::linear(x, first)), second);
  whole.sum().backward();
  on_two_ranks([&](model::TensorCollectives& collectives) {
    const int64_t rank = collectives.rank();
    const at::Tensor my_x = input.clone().requires_grad_(true);
    const at::Tensor my_first = first.narrow(0, rank * 4, 4);    // column-parallel: output features
    const at::Tensor my_second = second.narrow(1, rank * 4, 4);  // row-parallel: input features
    const at::Tensor hidden = at::tanh(at::linear(model::copy_to_tensor_region(my_x, collectives), my_first));
    const at::Tensor output = model::reduce_from_tensor_region(at::linear(hidden, my_second), collectives);
    output.sum().backward();
    EXPECT_TRUE(at::allclose(output, whole, 1e-12, 1e-12)) << "rank " << rank;
    EXPECT_TRUE(at::allclose(my_x.grad(), x.grad(), 1e-12, 1e-12)) << "rank " << rank;
  });
}

}  // namespace
}  // namespace graphed::dist
