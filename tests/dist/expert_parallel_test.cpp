// tests/dist/expert_parallel_test.cpp — expert parallelism over a real Gloo group: two ranks as threads of this
// process, meeting through one in-memory store. The all-to-all with equal and uneven splits and its autograd
// region (the backward is the exchange the other way), and an MoE layer split over the two ranks against one
// process holding every expert, in float64: each rank's output and input gradient equal one process's on that
// rank's tokens, the router's and shared expert's gradients too, and each held expert's gradient is the sum of
// the one-process gradients over both ranks' tokens. Drop-and-pad, dropless and grouped dropless; and a rank that
// receives no token. Skipped where this build has no Gloo.
#include "graphed/dist/expert_collectives.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "dist/expert_test_support.h"
#include "graphed/dist/detail/backend.h"
#include "graphed/model/moe.h"
#include "ranks_on_threads.h"

namespace graphed::dist {
namespace expert_parallel_test {  // named: the tests build as one unity source
namespace {

const auto kDoubleOptions = at::TensorOptions().dtype(at::kDouble);

/// Runs `body(collectives)` as 2 Gloo ranks on threads; rethrows the first failure.
void on_two_ranks(const std::function<void(std::shared_ptr<model::ExpertCollectives>)>& body) {
  const auto store = c10::make_intrusive<c10d::HashStore>();
  testing::run_ranks_on_threads(2, [&](int64_t rank) {
    auto backend = detail::make_gloo_backend(store, rank, 2, std::chrono::seconds(30), "127.0.0.1");
    Communicator group(backend, "expert-parallel", {0, 1}, rank);
    body(std::make_shared<GroupExpertCollectives>(group));
  });
}

class ExpertParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!detail::gloo_available()) GTEST_SKIP() << "this build has no Gloo";
  }
};

/// Rows numbered by their sender and place: rank r's row i holds 100 r + i.
at::Tensor numbered_rows(int64_t rank, int64_t rows) {
  return (at::arange(rows, kDoubleOptions) + 100.0 * static_cast<double>(rank)).unsqueeze(1).expand({rows, 2}).clone();
}

TEST_F(ExpertParallelTest, AllToAllSendsEachRankItsRowsInRankOrder) {
  on_two_ranks([](std::shared_ptr<model::ExpertCollectives> collectives) {
    const int64_t rank = collectives->rank();
    const at::Tensor mine = numbered_rows(rank, 4);
    // Equal parts: rows 0-1 go to rank 0, rows 2-3 to rank 1.
    const at::Tensor equal = collectives->all_to_all(mine, {}, {});
    const std::vector<double> expected_equal =
        rank == 0 ? std::vector<double>{0, 1, 100, 101} : std::vector<double>{2, 3, 102, 103};
    EXPECT_TRUE(at::equal(equal.select(1, 0), at::tensor(expected_equal, kDoubleOptions)));
    EXPECT_TRUE(at::equal(mine, numbered_rows(rank, 4))) << "the input is untouched";
    // Uneven: rank 0 sends 1 row to itself and 3 to rank 1; rank 1 sends 2 and 2.
    const std::vector<int64_t> input_splits = rank == 0 ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{2, 2};
    const std::vector<int64_t> output_splits = rank == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{3, 2};
    const at::Tensor uneven = collectives->all_to_all(mine, output_splits, input_splits);
    const std::vector<double> expected_uneven =
        rank == 0 ? std::vector<double>{0, 100, 101} : std::vector<double>{1, 2, 3, 102, 103};
    EXPECT_TRUE(at::equal(uneven.select(1, 0), at::tensor(expected_uneven, kDoubleOptions)));
    // Counts stacked in rank order.
    const at::Tensor counts = collectives->all_gather(at::full({3}, rank + 1, at::kLong));
    EXPECT_TRUE(at::equal(counts, at::stack({at::full({3}, 1, at::kLong), at::full({3}, 2, at::kLong)})));
  });
}

TEST_F(ExpertParallelTest, TheRegionsBackwardSendsTheGradientsBack) {
  on_two_ranks([](std::shared_ptr<model::ExpertCollectives> collectives) {
    const int64_t rank = collectives->rank();
    const std::vector<int64_t> input_splits = rank == 0 ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{2, 2};
    const std::vector<int64_t> output_splits = rank == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{3, 2};
    const at::Tensor input = numbered_rows(rank, 4).requires_grad_(true);
    const at::Tensor output = model::all_to_all_region(input, *collectives, output_splits, input_splits);
    // d(sum(output x weight))/d(row) is the weight where the row landed: weight = 1000 rank + position there.
    const at::Tensor weight =
        (at::arange(output.size(0), kDoubleOptions) + 1000.0 * static_cast<double>(rank)).unsqueeze(1).expand({-1, 2});
    const at::Tensor gradient = torch::autograd::grad({(output * weight).sum()}, {input})[0];
    // Rank 0's row 0 stayed at rank 0 position 0; rows 1-3 went to rank 1 positions 0-2. Rank 1's rows 0-1 went
    // to rank 0 positions 1-2; rows 2-3 stayed at rank 1 positions 3-4.
    const std::vector<double> expected =
        rank == 0 ? std::vector<double>{0, 1000, 1001, 1002} : std::vector<double>{1, 2, 1003, 1004};
    EXPECT_TRUE(at::equal(gradient.select(1, 0), at::tensor(expected, kDoubleOptions)));
  });
}

model::MoeShape moe_shape(const std::string& mode) {
  model::MoeShape shape;
  shape.hidden_size = 8;
  shape.num_experts = 4;
  shape.top_k = 2;
  shape.expert_ffn_hidden_size = 12;
  shape.shared_expert_size = 6;
  shape.aux_loss_coeff = 0.01;
  shape.init_std = 0.3;
  shape.output_init_std = 0.3;
  shape.swiglu = mode != "dropless";
  if (mode == "drop-and-pad") {
    shape.capacity_factor = 1.0;  // some assignments dropped: the same ones as one process, from the same tokens
    shape.pad_to_capacity = true;
  }
  shape.grouped_gemm = mode == "grouped" || mode == "static";
  if (mode == "static") shape.expert_rank_capacity_factor = 2.0;  // = the ranks: a block holds every assignment
  return shape;
}

/// One process's MoE (every expert) from the seed, in float64.
model::Moe whole_moe(const model::MoeShape& shape) {
  at::manual_seed(11);
  model::Moe moe(shape);
  moe->to(at::kDouble);
  return moe;
}

/// Each rank's tokens; with `skew` all positive, which skew_router sends to experts 0 and 1 alone.
at::Tensor tokens_of(int64_t rank, bool skew) {
  at::manual_seed(static_cast<uint64_t>(100 + rank));
  const at::Tensor tokens = at::randn({7, 8}, kDoubleOptions);
  return skew ? tokens.abs() : tokens;
}

/// Router rows that score positive tokens high for experts 0 and 1 and low for 2 and 3 (rank 1's experts).
void skew_router(model::Moe& moe) {
  at::NoGradGuard no_grad;
  at::Tensor router = moe->named_parameters()["router_weight"];
  router[0].fill_(1.0);
  router[1].fill_(0.5);
  router.narrow(0, 2, 2).fill_(-1.0);
}

struct MoeResult {
  at::Tensor output, input_gradient;
  std::map<std::string, at::Tensor> gradients;
};

MoeResult run_moe(model::Moe& moe, const at::Tensor& tokens) {
  const at::Tensor input = tokens.clone().requires_grad_(true);
  moe->zero_grad();
  auto [output, aux] = moe->forward(input);
  const at::Tensor target = at::cos(at::arange(output.numel(), kDoubleOptions)).view_as(output);
  const at::Tensor loss = (output * target).sum() + aux;
  loss.backward();
  MoeResult result{output.detach(), input.grad().clone(), {}};
  result.gradients = testing::gradients_of(moe);
  return result;
}

using testing::expect_close;

/// With `stash` (--moe-paged-stash), each rank's MoE keeps its experts' rows in a paged stash of that size factor: a
/// first, profiling run sizes it, and the run compared is the one that parks the rows.
void check_against_one_process(const model::MoeShape& shape, bool skew, std::optional<double> stash = std::nullopt) {
  // Every model and token is made here, before the threads: they would share the default generator.
  std::vector<MoeResult> whole;
  std::vector<model::Moe> split_moes;
  std::vector<at::Tensor> tokens;
  for (int64_t rank = 0; rank < 2; ++rank) {
    tokens.push_back(tokens_of(rank, skew));
    model::Moe moe = whole_moe(shape);
    if (skew) skew_router(moe);
    whole.push_back(run_moe(moe, tokens.back()));  // one process, on this rank's tokens
    split_moes.push_back(whole_moe(shape));
    if (skew) skew_router(split_moes.back());
  }
  on_two_ranks([&](std::shared_ptr<model::ExpertCollectives> collectives) {
    const int64_t rank = collectives->rank();
    model::Moe& moe = split_moes[static_cast<std::size_t>(rank)];
    moe->split_for_expert_parallel(model::ExpertParallel(collectives));
    std::shared_ptr<kernels::PagedStash> paged;
    if (stash) {
      paged = std::make_shared<kernels::PagedStash>(kernels::PagedStashOptions{4, *stash});
      moe->use_paged_stash(paged);
      run_moe(moe, tokens[static_cast<std::size_t>(rank)]);  // profiling: the rows stay whole
      paged->begin_iteration();
      ASSERT_TRUE(paged->sized());
    }
    const MoeResult split = run_moe(moe, tokens[static_cast<std::size_t>(rank)]);
    if (paged) EXPECT_EQ(paged->overflowed().item<int64_t>(), 0) << "the paged stash was full";
    if (shape.expert_rank_capacity_factor) {  // the comparison below holds only where no block overflowed
      const at::Tensor overflow = moe->take_overflow();
      EXPECT_EQ(overflow[0].item<int64_t>(), 0)
          << "a block overflowed: " << overflow[1].item<int64_t>() << " rows for one rank, factor "
          << *shape.expert_rank_capacity_factor << ", " << shape.num_experts << " experts";
    }
    const MoeResult& mine = whole[static_cast<std::size_t>(rank)];
    expect_close(split.output, mine.output, "output");
    expect_close(split.input_gradient, mine.input_gradient, "input gradient");
    for (const auto& [name, gradient] : split.gradients) {
      if (name.rfind("experts_", 0) != 0) {  // the router and the shared expert: this rank's tokens
        expect_close(gradient, mine.gradients.at(name), name);
        continue;
      }
      // This rank's experts: both ranks' tokens reach them.
      const int64_t local = shape.num_experts / 2;
      const at::Tensor both = whole[0].gradients.at(name) + whole[1].gradients.at(name);
      expect_close(gradient, both.narrow(0, local * rank, local), name);
    }
  });
}

TEST_F(ExpertParallelTest, DropAndPadOverTwoRanksEqualsOneProcess) {
  check_against_one_process(moe_shape("drop-and-pad"), false);
}

TEST_F(ExpertParallelTest, DroplessOverTwoRanksEqualsOneProcess) {
  check_against_one_process(moe_shape("dropless"), false);
}

TEST_F(ExpertParallelTest, GroupedDroplessOverTwoRanksEqualsOneProcess) {
  check_against_one_process(moe_shape("grouped"), false);
}

// --moe-expert-rank-capacity-factor 2 over 2 ranks: blocks of every assignment, so nothing overflows and the static
// blocks compute what one process does (the padding rows go through the last expert and are cut off).
TEST_F(ExpertParallelTest, StaticBlocksThatHoldEveryAssignmentEqualOneProcess) {
  check_against_one_process(moe_shape("static"), false);
}

// Blocks smaller than a rank's assignments (factor 1.5: 11 rows of 14) that the routing does not overflow, with two
// experts a rank and with one (2 experts, top-1): the filled slots land where one process computes them.
TEST_F(ExpertParallelTest, StaticBlocksSmallerThanTheAssignmentsEqualOneProcessWhileNothingOverflows) {
  model::MoeShape shape = moe_shape("static");
  shape.expert_rank_capacity_factor = 1.5;
  check_against_one_process(shape, false);
  shape.num_experts = 2;
  shape.top_k = 1;
  shape.expert_rank_capacity_factor = 1.8;  // 7 assignments: blocks of 7 x 1.8 / 2 -> 7 rows
  check_against_one_process(shape, false);
  shape.expert_rank_capacity_factor = 1.6;  // blocks of 6 rows, which this routing fills at most
  check_against_one_process(shape, false);
}

// A factor of 0.25 with every token routed to rank 0's experts: each rank has 14 assignments for rank 0 and a block
// of ceil(14 x 0.25 / 2) = 2 rows. Both ranks record the overflow and the rows needed; the dropless fallback then
// computes what one process does.
TEST_F(ExpertParallelTest, AnOverflowedBlockIsRecordedAndTheDroplessFallbackEqualsOneProcess) {
  model::MoeShape shape = moe_shape("static");
  shape.expert_rank_capacity_factor = 0.25;
  std::vector<MoeResult> whole;
  std::vector<model::Moe> split_moes;
  std::vector<at::Tensor> tokens;
  for (int64_t rank = 0; rank < 2; ++rank) {
    tokens.push_back(tokens_of(rank, true));
    model::Moe moe = whole_moe(shape);
    skew_router(moe);
    whole.push_back(run_moe(moe, tokens.back()));
    split_moes.push_back(whole_moe(shape));
    skew_router(split_moes.back());
  }
  on_two_ranks([&](std::shared_ptr<model::ExpertCollectives> collectives) {
    const auto rank = static_cast<std::size_t>(collectives->rank());
    model::Moe& moe = split_moes[rank];
    moe->split_for_expert_parallel(model::ExpertParallel(collectives));
    EXPECT_FALSE(moe->take_overflow().defined()) << "nothing recorded before a block was filled";
    run_moe(moe, tokens[rank]);
    EXPECT_TRUE(at::equal(moe->take_overflow(), at::tensor({int64_t{1}, int64_t{14}}))) << "overflowed, 14 rows needed";
    EXPECT_TRUE(at::equal(moe->take_overflow(), at::zeros({2}, at::kLong))) << "reset by the call";
    moe->use_dropless_dispatch(true);
    const MoeResult rerun = run_moe(moe, tokens[rank]);
    moe->use_dropless_dispatch(false);
    expect_close(rerun.output, whole[rank].output, "the dropless rerun's output");
    expect_close(rerun.input_gradient, whole[rank].input_gradient, "the dropless rerun's input gradient");
    EXPECT_TRUE(at::equal(moe->take_overflow(), at::zeros({2}, at::kLong))) << "the rerun fills no block";
  });
}

// --moe-paged-stash: the static blocks' experts park only their real rows and take them back for the backward; the
// outputs and every gradient are still one process's (the padding rows come back zero, and nothing reads their
// gradients). Factor 2 blocks (padding rows beside the real ones) and 1.5 ones, each with a pool that holds them.
TEST_F(ExpertParallelTest, ThePagedStashKeepsOnlyRealRowsAndStillEqualsOneProcess) {
  model::MoeShape shape = moe_shape("static");
  check_against_one_process(shape, false, 1.1);
  // Every token to rank 0's experts: rank 1 parks nothing, and rank 0 twice the balanced load (a pool sized from the
  // real rows measured holds it).
  check_against_one_process(shape, true, -1.0);
  shape.expert_rank_capacity_factor = 1.5;
  shape.bias = false;
  check_against_one_process(shape, false, -1.0);
}

// A pool too small for the real rows (a tenth of the balanced load): the put that finds no room parks nothing and
// marks the stash overflowed, which the trainer then runs again dropless.
TEST_F(ExpertParallelTest, APagedStashTooSmallIsMarkedOverflowed) {
  const model::MoeShape shape = moe_shape("static");
  std::vector<model::Moe> split_moes;
  std::vector<at::Tensor> tokens;
  for (int64_t rank = 0; rank < 2; ++rank) {
    tokens.push_back(tokens_of(rank, false));
    split_moes.push_back(whole_moe(shape));
  }
  on_two_ranks([&](std::shared_ptr<model::ExpertCollectives> collectives) {
    const auto rank = static_cast<std::size_t>(collectives->rank());
    model::Moe& moe = split_moes[rank];
    moe->split_for_expert_parallel(model::ExpertParallel(collectives));
    // Pages of one row, ceil(14 x 0.1) = 2 rows and a page for the one put alive: 3 pages for about 14 real rows.
    const auto paged = std::make_shared<kernels::PagedStash>(kernels::PagedStashOptions{1, 0.1});
    moe->use_paged_stash(paged);
    run_moe(moe, tokens[rank]);
    paged->begin_iteration();
    EXPECT_EQ(paged->overflowed().item<int64_t>(), 0);
    run_moe(moe, tokens[rank]);
    EXPECT_EQ(paged->overflowed().item<int64_t>(), 1) << "3 pages of one row for a rank's real rows";
    paged->begin_iteration();
    EXPECT_EQ(paged->overflowed().item<int64_t>(), 0) << "cleared for the next iteration";
  });
}

TEST_F(ExpertParallelTest, ARankWhoseExpertsReceiveNoTokenStillTakesPart) {
  for (const std::string mode : {"dropless", "grouped", "drop-and-pad", "static"}) {
    SCOPED_TRACE(mode);
    check_against_one_process(moe_shape(mode), true);
  }
}

TEST_F(ExpertParallelTest, EachRankKeepsItsShareOfTheExperts) {
  const model::MoeShape shape = moe_shape("grouped");
  model::Moe whole = whole_moe(shape);
  std::vector<model::Moe> split_moes = {whole_moe(shape), whole_moe(shape)};  // before the threads (one generator)
  on_two_ranks([&](std::shared_ptr<model::ExpertCollectives> collectives) {
    const int64_t rank = collectives->rank();
    model::Moe& moe = split_moes[static_cast<std::size_t>(rank)];
    moe->split_for_expert_parallel(model::ExpertParallel(collectives));
    EXPECT_EQ(moe->expert_parallel().first_expert(4), 2 * rank);
    const auto splits = moe->expert_splits();
    ASSERT_EQ(splits.size(), 4u);  // w1, w2 and the two biases
    for (const auto& [name, split] : splits) {
      EXPECT_EQ(split.split, model::TensorSplit::kColumn);
      EXPECT_EQ(split.dim, 0);
      EXPECT_TRUE(at::equal(moe->named_parameters()[name], whole->named_parameters()[name].narrow(0, 2 * rank, 2)))
          << name;
    }
    EXPECT_TRUE(at::equal(moe->named_parameters()["router_weight"], whole->named_parameters()["router_weight"]));
  });
}

}  // namespace
}  // namespace expert_parallel_test
}  // namespace graphed::dist
