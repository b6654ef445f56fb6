// tests/dist/expert_tensor_parallel_test.cpp — expert parallelism with tensor parallelism over real Gloo groups:
// four ranks as threads of this process (tensor 2 x data 2, Megatron's order: rank = data rank x 2 + tensor rank),
// each in a tensor group and in an expert group (the data ranks of its tensor rank), meeting through one in-memory
// store. An MoE layer split both ways against one process holding every expert, in float64, with and without
// sequence parallelism, in every dispatch mode: each rank's output and input gradient equal one process's on its
// tokens; a whole parameter's gradient equals one process's (summed over the tensor ranks where each saw its part
// of the sequence); each expert part's gradient is its slice of the one-process sum over both data ranks' tokens.
// And with every expert whole (Megatron's expert tensor size 1, sequence parallelism on): the expert group is the
// tensor group, and each expert's gradient is its slice of one process's on the data rank's tokens.
// Skipped where this build has no Gloo.
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "dist/expert_test_support.h"
#include "graphed/dist/detail/backend.h"
#include "graphed/dist/expert_collectives.h"
#include "graphed/dist/tensor_collectives.h"
#include "graphed/model/moe.h"
#include "graphed/model/tensor_shards.h"
#include "ranks_on_threads.h"

namespace graphed::dist {
namespace expert_tensor_parallel_test {  // named: the tests build as one unity source
namespace {

const auto kDoubleOptions = at::TensorOptions().dtype(at::kDouble);
constexpr int64_t kBatch = 2, kSequence = 4, kHidden = 8;

/// A rank's place: tensor rank fastest; its expert rank is its data rank when the experts split over the tensor
/// ranks, and its tensor rank when they are whole (expert tensor size 1: the expert group is the tensor group).
struct Place {
  int64_t rank, tensor_rank, data_rank;
  bool whole_experts = false;
  int64_t expert_rank() const { return whole_experts ? tensor_rank : data_rank; }
};

/// Runs `body` as 4 Gloo ranks on threads, each with its tensor group's and expert group's collectives; rethrows
/// the first failure.
void on_four_ranks(const std::function<void(const Place&, std::shared_ptr<model::TensorCollectives>,
                                            std::shared_ptr<model::ExpertCollectives>)>& body,
                   bool whole_experts = false) {
  const auto store = c10::make_intrusive<c10d::HashStore>();
  testing::run_ranks_on_threads(4, [&](int64_t rank) {
    const Place place{rank, rank % 2, rank / 2, whole_experts};
    const auto timeout = std::chrono::seconds(30);
    // Every rank builds its tensor group first, then its expert group: one order, so no rank waits on a group its
    // peer has not started.
    const auto tensor_store =
        c10::make_intrusive<c10d::PrefixStore>("tensor-" + std::to_string(place.data_rank), store);
    Communicator tensor_group(detail::make_gloo_backend(tensor_store, place.tensor_rank, 2, timeout, "127.0.0.1"),
                              "tensor-parallel", {2 * place.data_rank, 2 * place.data_rank + 1}, rank);
    const std::string expert_name = whole_experts ? "expert-data-" + std::to_string(place.data_rank)
                                                  : "expert-tensor-" + std::to_string(place.tensor_rank);
    const std::vector<int64_t> expert_ranks = whole_experts
                                                  ? std::vector<int64_t>{2 * place.data_rank, 2 * place.data_rank + 1}
                                                  : std::vector<int64_t>{place.tensor_rank, place.tensor_rank + 2};
    const auto expert_store = c10::make_intrusive<c10d::PrefixStore>(expert_name, store);
    Communicator expert_group(detail::make_gloo_backend(expert_store, place.expert_rank(), 2, timeout, "127.0.0.1"),
                              "expert-parallel", expert_ranks, rank);
    body(place, std::make_shared<GroupTensorCollectives>(tensor_group),
         std::make_shared<GroupExpertCollectives>(expert_group));
  });
}

class ExpertTensorParallelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!detail::gloo_available()) GTEST_SKIP() << "this build has no Gloo";
  }
};

model::MoeShape moe_shape(const std::string& mode) {
  model::MoeShape shape;
  shape.hidden_size = kHidden;
  shape.num_experts = 4;
  shape.top_k = 2;
  shape.expert_ffn_hidden_size = 12;
  shape.shared_expert_size = 6;
  shape.shared_expert_gate = true;
  shape.aux_loss_coeff = 0.01;
  shape.init_std = 0.3;
  shape.output_init_std = 0.3;
  shape.swiglu = mode != "dropless";
  if (mode == "drop-and-pad") {
    shape.capacity_factor = 2.0;  // = experts / top-k: every expert has a slot for every token, so none drops
    shape.pad_to_capacity = true;
  }
  shape.grouped_gemm = mode == "grouped" || mode == "static";
  if (mode == "static") shape.expert_rank_capacity_factor = 2.0;  // = the expert ranks: no block overflows
  return shape;
}

model::Moe whole_moe(const model::MoeShape& shape, bool skew) {
  at::manual_seed(11);
  model::Moe moe(shape);
  moe->to(at::kDouble);
  if (skew) {  // positive tokens go to experts 0 and 1 alone (expert rank 0's): expert rank 1 receives nothing
    at::NoGradGuard no_grad;
    at::Tensor router = moe->named_parameters()["router_weight"];
    router[0].fill_(1.0);
    router[1].fill_(0.5);
    router.narrow(0, 2, 2).fill_(-1.0);
  }
  return moe;
}

/// A data rank's tokens [b, s, h] (all positive with `skew`), and the weights its loss puts on the outputs.
at::Tensor tokens_of(int64_t data_rank, bool skew) {
  at::manual_seed(static_cast<uint64_t>(100 + data_rank));
  const at::Tensor tokens = at::randn({kBatch, kSequence, kHidden}, kDoubleOptions);
  return skew ? tokens.abs() : tokens;
}
at::Tensor target_of(int64_t data_rank) {
  return at::cos(at::arange(kBatch * kSequence * kHidden, kDoubleOptions) + static_cast<double>(data_rank))
      .view({kBatch, kSequence, kHidden});
}

/// This tensor rank's part of the sequence (dimension 1) under sequence parallelism, else all of it.
at::Tensor sequence_part(const at::Tensor& whole, bool sequence_parallel, int64_t tensor_rank) {
  return sequence_parallel ? whole.narrow(1, tensor_rank * kSequence / 2, kSequence / 2) : whole;
}

struct MoeResult {
  at::Tensor output, input_gradient;  // [b, s', h]
  std::map<std::string, at::Tensor> gradients;
};

MoeResult run_moe(model::Moe& moe, const at::Tensor& tokens, const at::Tensor& target) {
  const at::Tensor input = tokens.clone().requires_grad_(true);
  moe->zero_grad();
  auto [output, aux] = moe->forward(input);
  const at::Tensor shaped = output.view(tokens.sizes());
  ((shaped * target).sum() + aux).backward();
  MoeResult result{shaped.detach(), input.grad().clone(), {}};
  result.gradients = testing::gradients_of(moe);
  return result;
}

using testing::expect_close;

/// What a rank's gradient of `name` should be, from one process's gradients on each data rank's tokens; whole
/// parameters come back as one process's (the caller sums them over the tensor ranks where each saw a part).
at::Tensor expected_gradient(const std::string& name, const std::vector<MoeResult>& whole, const Place& place,
                             const std::map<std::string, model::ParameterSplit>& tensor_splits) {
  const bool expert = name.rfind("experts_", 0) == 0;
  // An expert's part sees its expert group's tokens: both data ranks' when split over the tensor ranks, this data
  // rank's sequence when whole (its group is the tensor group). Anything else sees this data rank's.
  at::Tensor gradient = expert && !place.whole_experts
                            ? whole[0].gradients.at(name) + whole[1].gradients.at(name)
                            : whole[static_cast<std::size_t>(place.data_rank)].gradients.at(name);
  const auto split = tensor_splits.find(name);
  if (split != tensor_splits.end() && split->second.split == model::TensorSplit::kFirstRank && place.tensor_rank != 0) {
    gradient = at::zeros_like(gradient);  // used by the first tensor rank only
  } else if (split != tensor_splits.end() && split->second.is_sharded()) {
    gradient = model::take_shard(gradient, split->second, {2, place.tensor_rank});
  }
  return expert ? gradient.narrow(0, 2 * place.expert_rank(), 2) : gradient;  // 2 experts an expert rank
}

void check_against_one_process(const std::string& mode, bool sequence_parallel, bool skew, bool whole_experts = false) {
  const model::MoeShape shape = moe_shape(mode);
  // Every model and token is made here, before the threads: they would share the default generator.
  std::vector<MoeResult> whole;
  for (int64_t data_rank = 0; data_rank < 2; ++data_rank) {
    model::Moe moe = whole_moe(shape, skew);
    whole.push_back(run_moe(moe, tokens_of(data_rank, skew), target_of(data_rank)));
  }
  std::vector<model::Moe> split_moes;
  std::vector<at::Tensor> tokens;
  for (int64_t rank = 0; rank < 4; ++rank) {
    split_moes.push_back(whole_moe(shape, skew));
    tokens.push_back(tokens_of(rank / 2, skew));
  }
  on_four_ranks(
      [&](const Place& place, std::shared_ptr<model::TensorCollectives> tensor,
          std::shared_ptr<model::ExpertCollectives> expert) {
        model::Moe& moe = split_moes[static_cast<std::size_t>(place.rank)];
        if (whole_experts) moe->keep_experts_whole();
        moe->split_for_tensor_parallel(model::TensorParallel(tensor, sequence_parallel));
        moe->split_for_expert_parallel(model::ExpertParallel(expert));
        const auto part = [&](const at::Tensor& t) { return sequence_part(t, sequence_parallel, place.tensor_rank); };
        const MoeResult split =
            run_moe(moe, part(tokens[static_cast<std::size_t>(place.rank)]), part(target_of(place.data_rank)));
        if (shape.expert_rank_capacity_factor) {
          EXPECT_EQ(moe->take_overflow()[0].item<int64_t>(), 0) << "a block overflowed";
        }
        const MoeResult& mine = whole[static_cast<std::size_t>(place.data_rank)];
        expect_close(split.output, part(mine.output), "output");
        expect_close(split.input_gradient, part(mine.input_gradient), "input gradient");
        std::map<std::string, model::ParameterSplit> splits;
        for (const auto& [name, parameter_split] : moe->tensor_splits()) splits.emplace(name, parameter_split);
        for (const auto& [name, gradient] : split.gradients) {  // in one order on every rank (the sums below)
          const at::Tensor expected = expected_gradient(name, whole, place, splits);
          const auto found = splits.find(name);
          const auto split_is = [&](model::TensorSplit kind) {
            return found != splits.end() && found->second.split == kind;
          };
          const bool expert = name.rfind("experts_", 0) == 0;  // a share of the experts, never a tensor-rank copy
          const bool whole_parameter = !expert && (found == splits.end() || split_is(model::TensorSplit::kReplicated) ||
                                                   split_is(model::TensorSplit::kSummed));
          // Under sequence parallelism a whole parameter's gradient comes from this rank's part of the sequence.
          const bool summed = whole_parameter && (sequence_parallel || split_is(model::TensorSplit::kSummed));
          expect_close(summed ? tensor->all_reduce_sum(gradient) : gradient, expected, name);
        }
      },
      whole_experts);
}

TEST_P(ExpertTensorParallelTest, EveryRankEqualsOneProcessWithoutSequenceParallelism) {
  check_against_one_process(GetParam(), false, false);
}

TEST_P(ExpertTensorParallelTest, EveryRankEqualsOneProcessWithSequenceParallelism) {
  check_against_one_process(GetParam(), true, false);
}

TEST_P(ExpertTensorParallelTest, AnExpertRankThatReceivesNoTokenStillTakesPart) {
  check_against_one_process(GetParam(), true, true);
}

// Expert tensor size 1: every expert whole on its expert rank, the expert group the tensor group (each rank sends its
// part of the sequence to the experts), as Megatron requires with sequence parallelism.
TEST_P(ExpertTensorParallelTest, WholeExpertsOverTheTensorRanksEqualOneProcess) {
  check_against_one_process(GetParam(), true, false, true);
  check_against_one_process(GetParam(), true, true, true);
}

INSTANTIATE_TEST_SUITE_P(Dispatch, ExpertTensorParallelTest,
                         ::testing::Values("drop-and-pad", "dropless", "grouped", "static"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST(ExpertTensorParallelSplitTest, EachRankKeepsItsTensorPartOfItsShareOfTheExperts) {
  if (!detail::gloo_available()) GTEST_SKIP() << "this build has no Gloo";
  const model::MoeShape shape = moe_shape("grouped");
  model::Moe whole = whole_moe(shape, false);
  std::vector<model::Moe> split_moes;
  for (int64_t rank = 0; rank < 4; ++rank) split_moes.push_back(whole_moe(shape, false));
  on_four_ranks([&](const Place& place, std::shared_ptr<model::TensorCollectives> tensor,
                    std::shared_ptr<model::ExpertCollectives> expert) {
    model::Moe& moe = split_moes[static_cast<std::size_t>(place.rank)];
    moe->split_for_tensor_parallel(model::TensorParallel(tensor, true));
    moe->split_for_expert_parallel(model::ExpertParallel(expert));
    // w1 [E, h, 2f]: SwiGLU's halves each split over the tensor ranks, then experts 2 x data rank .. + 1.
    const auto w1 = whole->named_parameters()["experts_w1"];
    const int64_t f = shape.expert_ffn_hidden_size, quarter = f / 2;
    const at::Tensor expected_w1 = at::cat({w1.narrow(2, place.tensor_rank * quarter, quarter),
                                            w1.narrow(2, f + place.tensor_rank * quarter, quarter)},
                                           2)
                                       .narrow(0, 2 * place.data_rank, 2);
    EXPECT_TRUE(at::equal(moe->named_parameters()["experts_w1"], expected_w1));
    // w2 [E, f, h]: row-parallel (dimension 1), then the experts.
    const at::Tensor expected_w2 = whole->named_parameters()["experts_w2"]
                                       .narrow(1, place.tensor_rank * quarter, quarter)
                                       .narrow(0, 2 * place.data_rank, 2);
    EXPECT_TRUE(at::equal(moe->named_parameters()["experts_w2"], expected_w2));
    EXPECT_TRUE(at::equal(moe->named_parameters()["router_weight"], whole->named_parameters()["router_weight"]));
  });
}

}  // namespace
}  // namespace expert_tensor_parallel_test
}  // namespace graphed::dist
