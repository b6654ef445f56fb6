// tests/model/tensor_parallel_test.cpp — Megatron's region mappings over 2 and 4 ranks simulated by
// threads in one process (ThreadCollectives: each collective waits for every rank, then combines in rank
// order), in float64: a column-parallel then row-parallel MLP gives the one-process output, input gradient
// and weight gradients (each rank's the slice of the whole); gather and scatter are each other's
// inverses, forward and backward.
#include "graphed/model/tensor_parallel.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "ranks_on_threads.h"

namespace graphed::model {
namespace {

const auto kDouble = at::TensorOptions().dtype(at::kDouble);

/// The ranks' shared meeting point: a collective deposits every rank's tensor, then each rank combines
/// them in rank order. Waits at most 20 s, so a mismatched collective fails instead of hanging.
class Rendezvous {
 public:
  explicit Rendezvous(int64_t size) : size_(size), deposits_(static_cast<std::size_t>(size)) {}

  std::vector<at::Tensor> exchange(int64_t rank, const at::Tensor& tensor) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t round = round_;
    deposits_[static_cast<std::size_t>(rank)] = tensor.clone();
    if (++arrived_ == size_) {
      arrived_ = 0;
      taken_ = 0;
      result_ = deposits_;
      ++round_;
      changed_.notify_all();
    } else if (!changed_.wait_for(lock, std::chrono::seconds(20), [&] { return round_ != round; })) {
      throw std::runtime_error("a collective waited 20 s for the other ranks");
    }
    std::vector<at::Tensor> all = result_;
    if (++taken_ == size_) result_.clear();
    return all;
  }

 private:
  int64_t size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<at::Tensor> deposits_, result_;
  int64_t arrived_ = 0, taken_ = 0, round_ = 0;
};

class ThreadCollectives final : public TensorCollectives {
 public:
  ThreadCollectives(Rendezvous& rendezvous, int64_t size, int64_t rank)
      : rendezvous_(rendezvous), size_(size), rank_(rank) {}
  int64_t size() const override { return size_; }
  int64_t rank() const override { return rank_; }
  at::Tensor all_reduce_sum(const at::Tensor& tensor) override {
    const auto all = rendezvous_.exchange(rank_, tensor);
    at::Tensor sum = all[0].clone();
    for (std::size_t r = 1; r < all.size(); ++r) sum = sum + all[r];
    return sum;
  }
  at::Tensor all_gather(const at::Tensor& tensor, int64_t dim) override {
    return at::cat(rendezvous_.exchange(rank_, tensor), dim);
  }

 private:
  Rendezvous& rendezvous_;
  int64_t size_, rank_;
};

/// Runs `body(collectives)` on `size` threads, one rank each; rethrows the first failure.
void on_ranks(int64_t size, const std::function<void(TensorCollectives&)>& body) {
  Rendezvous rendezvous(size);
  testing::run_ranks_on_threads(size, [&](int64_t rank) {
    ThreadCollectives collectives(rendezvous, size, rank);
    body(collectives);
  });
}

at::Tensor part(const at::Tensor& tensor, int64_t dim, int64_t size, int64_t rank) {
  const int64_t length = tensor.size(dim) / size;
  return tensor.narrow(dim, rank * length, length);
}

TEST(TensorParallelTest, ColumnThenRowParallelMlpEqualsOneProcess) {
  at::manual_seed(5);
  const int64_t hidden = 6, ffn = 8;
  const at::Tensor input = at::randn({3, 2, hidden}, kDouble);
  const at::Tensor fc1 = at::randn({ffn, hidden}, kDouble), fc1_bias = at::randn({ffn}, kDouble);
  const at::Tensor fc2 = at::randn({hidden, ffn}, kDouble), fc2_bias = at::randn({hidden}, kDouble);
  const at::Tensor output_weights = at::randn({3, 2, hidden}, kDouble);
  // One process.
  const at::Tensor x = input.clone().requires_grad_(true);
  const at::Tensor w1 = fc1.clone().requires_grad_(true), w2 = fc2.clone().requires_grad_(true);
  const at::Tensor whole = at::linear(at::gelu(at::linear(x, w1, fc1_bias)), w2, fc2_bias);
  (whole * output_weights).sum().backward();
  for (const int64_t size : {2, 4}) {
    on_ranks(size, [&](TensorCollectives& collectives) {
      const int64_t rank = collectives.rank();
      const at::Tensor my_x = input.clone().requires_grad_(true);
      const at::Tensor my_w1 = part(fc1, 0, size, rank).clone().requires_grad_(true);
      const at::Tensor my_w2 = part(fc2, 1, size, rank).clone().requires_grad_(true);
      const at::Tensor region = copy_to_tensor_region(my_x, collectives);
      const at::Tensor activation = at::gelu(at::linear(region, my_w1, part(fc1_bias, 0, size, rank)));
      const at::Tensor output = reduce_from_tensor_region(at::linear(activation, my_w2), collectives) + fc2_bias;
      (output * output_weights).sum().backward();
      const std::string where = std::to_string(size) + " ranks, rank " + std::to_string(rank);
      EXPECT_TRUE(at::allclose(output, whole, 1e-12, 1e-12)) << where;
      EXPECT_TRUE(at::allclose(my_x.grad(), x.grad(), 1e-12, 1e-12)) << where << ": the input's gradient";
      EXPECT_TRUE(at::allclose(my_w1.grad(), part(w1.grad(), 0, size, rank), 1e-12, 1e-12)) << where;
      EXPECT_TRUE(at::allclose(my_w2.grad(), part(w2.grad(), 1, size, rank), 1e-12, 1e-12)) << where;
    });
  }
}

TEST(TensorParallelTest, GatherAndScatterAreInversesForwardAndBackward) {
  at::manual_seed(6);
  const at::Tensor whole = at::randn({2, 3, 8}, kDouble);
  const at::Tensor gradient = at::randn({2, 3, 8}, kDouble);
  on_ranks(2, [&](TensorCollectives& collectives) {
    const int64_t rank = collectives.rank();
    // scatter: this rank's part forward; every rank's gradient part gathered backward.
    const at::Tensor input = whole.clone().requires_grad_(true);
    const at::Tensor mine = scatter_to_tensor_region(input, collectives);
    EXPECT_TRUE(at::equal(mine, part(whole, 2, 2, rank)));
    mine.backward(part(gradient, 2, 2, rank));
    EXPECT_TRUE(at::equal(input.grad(), gradient)) << "rank " << rank;
    // gather: every rank's part forward; this rank's part of the gradient backward.
    const at::Tensor piece = part(whole, 2, 2, rank).clone().requires_grad_(true);
    const at::Tensor gathered = gather_from_tensor_region(piece, collectives);
    EXPECT_TRUE(at::equal(gathered, whole));
    gathered.backward(gradient);
    EXPECT_TRUE(at::equal(piece.grad(), part(gradient, 2, 2, rank))) << "rank " << rank;
  });
}

}  // namespace
}  // namespace graphed::model
