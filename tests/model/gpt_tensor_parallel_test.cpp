// tests/model/gpt_tensor_parallel_test.cpp — a GPT model split over 2 ranks (threads, model/thread_collectives.h)
// computes what the whole model computes, in float64: the training loss and every gradient (each rank's part
// of the whole gradient; a row-parallel bias's on the first rank; decoding is tests/infer/
// tensor_parallel_decode_test.cpp's). For a Llama-style model (RoPE, GQA, RMSNorm, SwiGLU, untied output) and a
// GPT-2-style one (learned positions, LayerNorm, GELU, biases, tied embeddings), each also with sequence parallelism
// (training only: the norms' and position embeddings' gradients are then the ranks' parts of the whole, as the shared
// q/k norms' always are: checked for a Qwen3-style model), and a Mamba-hybrid one (M*M-: Megatron's MambaMixer split by
// heads and groups), with and without sequence parallelism. Every sharded gradient also joins back to the whole one
// (join_shards, as checkpoints join).
#include <gtest/gtest.h>

#include <ATen/core/grad_mode.h>

#include "graphed/model/gpt_model.h"
#include "model/tensor_parallel_cases.h"
#include "model/thread_collectives.h"
#include "run_config_for_test.h"

namespace graphed::model {
namespace {

using testing::Case;
using testing::cases;
using testing::hybrid_settings;

class GptTensorParallel : public ::testing::TestWithParam<Case> {};

constexpr int64_t kRanks = 2;

GptModel whole_model(const config::RunConfig& config) {
  at::manual_seed(11);
  GptModel model(config.model, config.moe_layers);
  model->to(at::kDouble);
  return model;
}

/// Every rank's gradient of each sharded parameter joined (join_shards, as a checkpoint joins) equals the
/// whole model's gradient.
void expect_joined_gradients(const std::vector<std::map<std::string, at::Tensor>>& parts,
                             const std::map<std::string, ParameterSplit>& splits,
                             const std::map<std::string, at::Tensor>& gradients) {
  for (const auto& [name, split] : splits) {
    if (!split.is_sharded()) continue;
    std::vector<at::Tensor> shards;
    for (const auto& rank_parts : parts) shards.push_back(rank_parts.at(name));
    EXPECT_TRUE(at::allclose(join_shards(shards, split), gradients.at(name), 1e-9, 1e-10)) << name << " joined";
  }
}

TEST_P(GptTensorParallel, TrainingEqualsTheWholeModel) {
  const auto config = testing::run_config(GetParam().settings);
  const at::Tensor tokens = at::randint(0, 50, {2, 16}, at::kLong);
  const at::Tensor labels = at::randint(0, 50, {2, 16}, at::kLong);
  GptModel whole = whole_model(config);
  const at::Tensor loss = whole->forward(tokens, labels, 0).loss;
  loss.backward();
  std::map<std::string, at::Tensor> gradients;
  for (const auto& item : whole->named_parameters()) gradients[item.key()] = item.value().grad();

  testing::Rendezvous rendezvous(kRanks);
  std::vector<std::shared_ptr<TensorCollectives>> groups;
  std::vector<GptModel> models;
  for (int64_t rank = 0; rank < kRanks; ++rank) {  // built here: the seed is process-wide
    groups.push_back(std::make_shared<testing::ThreadCollectives>(rendezvous, kRanks, rank));
    models.push_back(whole_model(config));
    models.back()->split_for_tensor_parallel(groups.back(), GetParam().sequence_parallel);
  }
  const auto splits = models[0]->tensor_splits();
  std::vector<std::map<std::string, at::Tensor>> whole_on_every_rank(kRanks);  // gradients of the unsplit
  std::vector<std::map<std::string, at::Tensor>> parts(kRanks);                // each rank's gradient of the split ones
  testing::run_ranks_on_threads(kRanks, [&](int64_t rank) {
    GptModel& model = models[static_cast<std::size_t>(rank)];
    const at::Tensor part_loss = model->forward(tokens, labels, 0).loss;
    EXPECT_NEAR(part_loss.item<double>(), loss.item<double>(), 1e-10) << "rank " << rank;
    part_loss.backward();
    for (const auto& item : model->named_parameters()) {
      const auto split = splits.find(item.key());
      const bool summed = split != splits.end() && split->second.split == TensorSplit::kSummed;
      at::Tensor expected = gradients.at(item.key());
      if (split != splits.end() && !summed) {
        expected = split->second.split == TensorSplit::kFirstRank && rank != 0
                       ? at::zeros_like(expected)
                       : take_shard(expected, split->second, TensorShard{kRanks, rank});
      }
      const at::Tensor got = item.value().grad().defined() ? item.value().grad() : at::zeros_like(item.value());
      ASSERT_EQ(got.sizes(), expected.sizes()) << item.key();
      if (split != splits.end()) parts[static_cast<std::size_t>(rank)][item.key()] = got;
      if (summed || (split == splits.end() && GetParam().sequence_parallel)) {  // this rank's share of the whole
        whole_on_every_rank[static_cast<std::size_t>(rank)][item.key()] = got;
        continue;
      }
      EXPECT_TRUE(at::allclose(got, expected, 1e-9, 1e-10)) << item.key() << " on rank " << rank;
    }
  });
  for (const auto& [name, share] : whole_on_every_rank[0]) {
    const at::Tensor sum = share + whole_on_every_rank[1].at(name);
    EXPECT_TRUE(at::allclose(sum, gradients.at(name), 1e-9, 1e-10)) << name << ": the ranks' shares add up";
  }
  expect_joined_gradients(parts, splits, gradients);
}

TEST(GptTensorParallelSplits, NameEveryShardedParameterOfTheModel) {
  const auto config = testing::run_config(cases()[0].settings);
  GptModel model = whole_model(config);
  const auto splits = model->tensor_splits();
  std::set<std::string> names;
  for (const auto& item : model->named_parameters()) names.insert(item.key());
  for (const auto& [name, split] : splits) EXPECT_EQ(names.count(name), 1U) << name << " is no parameter";
  EXPECT_EQ(splits.at("layers.1.attention.qkv_weight").split, TensorSplit::kQkv);
  EXPECT_EQ(splits.at("layers.0.mlp.fc1_weight").split, TensorSplit::kSwiglu);
  EXPECT_EQ(splits.at("layers.0.mlp.fc2_weight").split, TensorSplit::kRow);
  EXPECT_EQ(splits.at("output_weight").split, TensorSplit::kColumn);
  EXPECT_EQ(splits.count("layers.0.input_norm.weight"), 0U);
}

TEST(GptTensorParallelSplits, AHybridModelsShardsJoinBackToEveryWholeParameter) {
  const auto config = testing::run_config(hybrid_settings());
  GptModel whole = whole_model(config);
  testing::Rendezvous rendezvous(kRanks);  // splitting communicates nothing
  std::vector<GptModel> models;
  for (int64_t rank = 0; rank < kRanks; ++rank) {
    models.push_back(whole_model(config));
    models.back()->split_for_tensor_parallel(std::make_shared<testing::ThreadCollectives>(rendezvous, kRanks, rank));
  }
  const auto splits = models[0]->tensor_splits();  // the checkpoint's table: whole sizes after the split too
  EXPECT_EQ(splits.size(), whole->tensor_splits().size());
  EXPECT_EQ(splits.at("layers.0.mamba.in_proj_weight").split, TensorSplit::kSegments);
  EXPECT_EQ(splits.at("layers.2.mamba.conv_weight").segments, (std::vector<int64_t>{64, 32, 32}));
  EXPECT_EQ(splits.at("layers.0.mamba.out_proj_weight").split, TensorSplit::kRow);
  int64_t mamba_parameters = 0;
  for (const auto& item : whole->named_parameters()) {
    const auto split = splits.find(item.key());
    const bool mamba = item.key().find(".mamba.") != std::string::npos;
    mamba_parameters += mamba ? 1 : 0;
    EXPECT_TRUE(!mamba || (split != splits.end() && split->second.is_sharded())) << item.key() << " is not split";
    std::vector<at::Tensor> shards;
    for (auto& model : models) shards.push_back(model->named_parameters()[item.key()].detach());
    const at::Tensor joined = split == splits.end() ? shards[0] : join_shards(shards, split->second);
    EXPECT_TRUE(at::equal(joined, item.value())) << item.key();
    if (split != splits.end()) {
      EXPECT_EQ(whole_sizes(shards[1], split->second, kRanks), item.value().sizes().vec()) << item.key();
    }
  }
  EXPECT_EQ(mamba_parameters, 2 * 8);  // two Mamba layers of 8 parameters each
  // The rank computes with its own heads and groups, and its caches hold its channels and heads.
  const MambaShape& own = models[1]->layers()[0]->named_children()["mamba"]->as<MambaMixerImpl>()->shape();
  EXPECT_EQ(own.num_heads(), 4);
  EXPECT_EQ(own.num_groups, 2);
  const LayerCache cache = models[1]->layers()[0]->allocate_paged_cache(1, 16, 3, at::kDouble);
  EXPECT_EQ(cache.conv_state.sizes().vec(), (std::vector<int64_t>{3, 3, 32 + 2 * 2 * 8}));
  EXPECT_EQ(cache.ssm_state.sizes().vec(), (std::vector<int64_t>{3, 4, 8, 8}));
}

TEST(GptTensorParallelSplits, APaddedVocabularyKeepsEveryRealIdsLogits) {
  const auto config = testing::run_config(cases()[0].settings);  // vocabulary 50
  GptModel model = whole_model(config);
  model->eval();
  at::NoGradGuard no_grad;
  const at::Tensor tokens = at::randint(0, 50, {1, 8}, at::kLong);
  const at::Tensor before = model->logits(tokens);
  model->pad_vocabulary(64);
  const at::Tensor after = model->logits(tokens);
  ASSERT_EQ(after.size(-1), 64);
  EXPECT_EQ(model->config().vocab_size, 64);
  EXPECT_TRUE(at::equal(after.narrow(-1, 0, 50), before));
  EXPECT_TRUE(at::equal(after.narrow(-1, 50, 14), at::zeros_like(after.narrow(-1, 50, 14))));  // zero rows
}

INSTANTIATE_TEST_SUITE_P(Models, GptTensorParallel, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace graphed::model
