// tests/model/tensor_parallel_test.cpp — Megatron's region mappings over 2 and 4 ranks simulated by
// threads in one process (model/thread_collectives.h), in float64: a column-parallel then row-parallel MLP
// gives the one-process output, input gradient and weight gradients (each rank's the slice of the whole);
// gather and scatter are each other's inverses, forward and backward; the vocab-parallel embedding and
// cross-entropy equal the whole vocabulary's.
#include "graphed/model/tensor_parallel.h"

#include <vector>

#include <gtest/gtest.h>

#include "model/thread_collectives.h"

namespace graphed::model {
namespace {

using testing::on_ranks;

const auto kDouble = at::TensorOptions().dtype(at::kDouble);

at::Tensor part(const at::Tensor& tensor, int64_t dim, int64_t size, int64_t rank) {
  const int64_t length = tensor.size(dim) / size;
  return tensor.narrow(dim, rank * length, length);
}

TEST(TensorParallelTest, DropoutInARegionDrawsFromTheRanksOwnStream) {
  // Megatron's model-parallel RNG: with a stream, the work draws its numbers; the default generator stays put.
  at::manual_seed(3);
  const at::Tensor undisturbed = at::rand({5});
  at::manual_seed(3);
  const auto stream = std::make_shared<capture::RandomStream>(at::Device(at::kCPU), 2718 + 1, "model_parallel");
  const TensorParallel with_stream(nullptr, false, stream);
  const at::Tensor drawn = with_stream.with_rank_random([] { return at::rand({4}); });
  at::Generator rank_one = at::detail::createCPUGenerator(2718 + 1);
  EXPECT_TRUE(at::equal(drawn, at::rand({4}, rank_one)));
  EXPECT_TRUE(at::equal(at::rand({5}), undisturbed));
  at::manual_seed(3);
  const TensorParallel without_stream;
  EXPECT_TRUE(at::equal(without_stream.with_rank_random([] { return at::rand({5}); }), undisturbed))
      << "without a stream the work draws from the default generator";
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

/// The group as a TensorParallel, not owning it (on_ranks owns it).
TensorParallel borrowed(TensorCollectives& collectives) {
  return TensorParallel(std::shared_ptr<TensorCollectives>(&collectives, [](TensorCollectives*) {}));
}

TEST(TensorParallelTest, VocabParallelEmbeddingEqualsTheWholeTable) {
  at::manual_seed(7);
  const at::Tensor table = at::randn({10, 3}, kDouble);
  const at::Tensor tokens = at::tensor({0L, 4L, 5L, 9L, 3L, 5L}, at::kLong).view({2, 3});
  const at::Tensor gradient = at::randn({2, 3, 3}, kDouble);
  const at::Tensor whole = table.clone().requires_grad_(true);
  at::embedding(whole, tokens).backward(gradient);
  on_ranks(2, [&](TensorCollectives& collectives) {
    const int64_t rank = collectives.rank();
    const at::Tensor mine = part(table, 0, 2, rank).clone().requires_grad_(true);
    const at::Tensor rows = borrowed(collectives).embedding(mine, tokens);
    EXPECT_TRUE(at::equal(rows, at::embedding(table, tokens))) << "rank " << rank;
    rows.backward(gradient);
    EXPECT_TRUE(at::allclose(mine.grad(), part(whole.grad(), 0, 2, rank))) << "rank " << rank;
  });
}

TEST(TensorParallelTest, VocabParallelCrossEntropyEqualsTheWholeVocabulary) {
  at::manual_seed(8);
  const at::Tensor logits = at::randn({5, 12}, kDouble) * 4;
  const at::Tensor labels = at::tensor({0L, 11L, 6L, 5L, 2L}, at::kLong);
  const at::Tensor whole = logits.clone().requires_grad_(true);
  const at::Tensor expected = at::cross_entropy_loss(whole, labels);
  expected.backward();
  for (const int64_t size : {2, 3}) {
    on_ranks(size, [&](TensorCollectives& collectives) {
      const int64_t rank = collectives.rank();
      const at::Tensor mine = part(logits, 1, size, rank).clone().requires_grad_(true);
      const at::Tensor loss = borrowed(collectives).cross_entropy(mine, labels);
      EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-12) << size << " ranks, rank " << rank;
      loss.backward();
      EXPECT_TRUE(at::allclose(mine.grad(), part(whole.grad(), 1, size, rank), 1e-12, 1e-12)) << "rank " << rank;
    });
  }
}

}  // namespace
}  // namespace graphed::model
