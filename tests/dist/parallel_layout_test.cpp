// tests/dist/parallel_layout_test.cpp — each rank's place in the tensor x data x pipeline grid
// (Megatron's order: tensor ranks fastest, then data, then pipeline) and the layers of each model chunk,
// interleaved virtual stages included.
#include "graphed/dist/parallel_layout.h"

#include <vector>

#include <gtest/gtest.h>

#include "graphed/config/run_config.h"
#include "graphed/config/settings.h"

namespace graphed::dist {
namespace {

using nlohmann::json;

/// A resolved configuration for a launch of `world_size` processes (WORLD_SIZE is not a setting).
config::RunConfig launched(const json& overrides, int64_t world_size) {
  config::Settings settings;
  config::apply_settings(settings, overrides, "test");
  settings.train.world_size = world_size;
  return config::resolve_run_config_or_throw(settings);
}

TEST(ParallelLayoutTest, OneProcessHoldsEveryLayerInOneChunk) {
  const ParallelLayout layout = make_parallel_layout(launched({{"num_layers", 3}}, 1), 0);
  EXPECT_EQ(layout.world_size, 1);
  EXPECT_EQ(layout.data_size, 1);
  EXPECT_EQ(layout.pipeline_size, 1);
  EXPECT_EQ(layout.chunks, 1);
  EXPECT_FALSE(layout.is_pipelined());
  EXPECT_EQ(layout.data_group(), std::vector<int64_t>{0});
  EXPECT_EQ(layout.pipeline_group(), std::vector<int64_t>{0});
  const ModelChunk chunk = layout.chunk(0);
  EXPECT_EQ(chunk.first_layer, 0);
  EXPECT_EQ(chunk.layer_count, 3);
  EXPECT_TRUE(chunk.first_stage);
  EXPECT_TRUE(chunk.last_stage);
}

TEST(ParallelLayoutTest, FourRanksInTwoStagesGroupConsecutiveRanksForData) {
  const config::RunConfig config = launched({{"num_layers", 8}, {"pipeline_model_parallel_size", 2}}, 4);
  ASSERT_EQ(*config.train.data_parallel_size, 2);  // derived: 4 / (tensor 1 x pipeline 2)
  const std::vector<std::vector<int64_t>> data_groups = {{0, 1}, {0, 1}, {2, 3}, {2, 3}};
  const std::vector<std::vector<int64_t>> pipeline_groups = {{0, 2}, {1, 3}, {0, 2}, {1, 3}};
  for (int64_t rank = 0; rank < 4; ++rank) {
    const ParallelLayout layout = make_parallel_layout(config, rank);
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(layout.pipeline_rank(), rank / 2);
    EXPECT_EQ(layout.data_rank(), rank % 2);
    EXPECT_EQ(layout.rank_at(layout.pipeline_rank(), layout.data_rank()), rank);
    EXPECT_EQ(layout.data_group(), data_groups[rank]);
    EXPECT_EQ(layout.pipeline_group(), pipeline_groups[rank]);
    EXPECT_EQ(layout.holds_embedding(), rank < 2);
    EXPECT_EQ(layout.holds_loss(), rank >= 2);
    const ModelChunk chunk = layout.chunk(0);
    EXPECT_EQ(chunk.first_layer, rank < 2 ? 0 : 4);
    EXPECT_EQ(chunk.layer_count, 4);
    EXPECT_EQ(chunk.first_stage, rank < 2);
    EXPECT_EQ(chunk.last_stage, rank >= 2);
  }
}

TEST(ParallelLayoutTest, VirtualStagesInterleaveTheChunksOverThePipelineRanks) {
  const config::RunConfig config = launched(
      {{"num_layers", 8}, {"pipeline_model_parallel_size", 2}, {"num_layers_per_virtual_pipeline_stage", 2}}, 2);
  const ParallelLayout layout = make_parallel_layout(config, 0);
  ASSERT_EQ(layout.chunks, 2);
  struct Expected {
    int64_t pipeline_rank, chunk, first_layer, virtual_stage;
    bool first_stage, last_stage;
  };
  for (const Expected& e : {Expected{0, 0, 0, 0, true, false}, Expected{1, 0, 2, 1, false, false},
                            Expected{0, 1, 4, 2, false, false}, Expected{1, 1, 6, 3, false, true}}) {
    SCOPED_TRACE("chunk(" + std::to_string(e.pipeline_rank) + ", " + std::to_string(e.chunk) + ")");
    const ModelChunk chunk = layout.chunk(e.pipeline_rank, e.chunk);
    EXPECT_EQ(chunk.first_layer, e.first_layer);
    EXPECT_EQ(chunk.layer_count, 2);
    EXPECT_EQ(chunk.end_layer(), e.first_layer + 2);
    EXPECT_EQ(chunk.first_stage, e.first_stage);
    EXPECT_EQ(chunk.last_stage, e.last_stage);
    EXPECT_EQ(layout.virtual_stage(e.pipeline_rank, e.chunk), e.virtual_stage);
  }
  // chunk(c) is chunk(pipeline_rank(), c): rank 1 is pipeline rank 1 (data-parallel size 1).
  const ParallelLayout second = make_parallel_layout(config, 1);
  EXPECT_EQ(second.chunk(1).first_layer, 6);
  EXPECT_TRUE(second.chunk(1).last_stage);
}

TEST(ParallelLayoutTest, TensorRanksAreFastestThenDataThenPipeline) {
  // Megatron's order for tensor 2 x data 2 x pipeline 2 on 8 ranks (the data size follows from the launch).
  const config::RunConfig config = launched({{"num_layers", 4},
                                             {"tensor_model_parallel_size", 2},
                                             {"pipeline_model_parallel_size", 2},
                                             {"global_batch_size", 2},
                                             {"micro_batch_size", 1}},
                                            8);
  for (int64_t rank = 0; rank < 8; ++rank) {
    const ParallelLayout layout = make_parallel_layout(config, rank);
    EXPECT_EQ(layout.data_size, 2);
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(layout.tensor_rank(), rank % 2);
    EXPECT_EQ(layout.data_rank(), rank / 2 % 2);
    EXPECT_EQ(layout.pipeline_rank(), rank / 4);
    EXPECT_EQ(layout.rank_at(layout.pipeline_rank(), layout.data_rank(), layout.tensor_rank()), rank);
    const int64_t tensor_start = rank - rank % 2;
    EXPECT_EQ(layout.tensor_group(), (std::vector<int64_t>{tensor_start, tensor_start + 1}));
    const int64_t data_start = rank / 4 * 4 + rank % 2;
    EXPECT_EQ(layout.data_group(), (std::vector<int64_t>{data_start, data_start + 2}));
    EXPECT_EQ(layout.pipeline_group(), (std::vector<int64_t>{rank % 4, rank % 4 + 4}));
  }
}

// Megatron's expert order with the expert tensor size equal to the tensor size: an expert group is consecutive
// data ranks, an expert-data group every expert_size-th one (docs/design/expert-parallel-plan.md, 1.2).
TEST(ParallelLayoutTest, ExpertGroupsAreConsecutiveDataRanks) {
  const config::RunConfig config = launched({{"num_layers", 2},
                                             {"num_experts", 8},
                                             {"moe_token_dispatcher_type", "alltoall"},
                                             {"expert_model_parallel_size", 2}},
                                            4);
  const std::vector<std::vector<int64_t>> expert_groups = {{0, 1}, {0, 1}, {2, 3}, {2, 3}};
  const std::vector<std::vector<int64_t>> expert_data_groups = {{0, 2}, {1, 3}, {0, 2}, {1, 3}};
  for (int64_t rank = 0; rank < 4; ++rank) {
    const ParallelLayout layout = make_parallel_layout(config, rank);
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(layout.expert_size, 2);
    EXPECT_EQ(layout.expert_rank(), rank % 2);
    EXPECT_EQ(layout.expert_data_rank(), rank / 2);
    EXPECT_EQ(layout.expert_data_size(), 2);
    EXPECT_EQ(layout.expert_group(), expert_groups[rank]);
    EXPECT_EQ(layout.expert_data_group(), expert_data_groups[rank]);
    EXPECT_EQ(layout.data_group(), (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_FALSE(layout.holds_whole_model());
  }
}

// With tensor ranks too, the same formula gives Megatron's groups for its expert tensor size equal to the tensor size
// (docs/design/expert-tensor-parallel-plan.md, section 1: world 8, tensor 2, expert 2, data 4): the groups expert with
// tensor parallelism trains over.
TEST(ParallelLayoutTest, ExpertGroupsWithTensorRanksAreMegatrons) {
  ParallelLayout layout;
  layout.world_size = 8;
  layout.tensor_size = 2;
  layout.data_size = 4;
  layout.expert_size = 2;
  layout.expert_tensor_size = 2;  // Megatron's default: the tensor size
  layout.num_layers = 2;
  const std::vector<std::vector<int64_t>> expert_groups = {{0, 2}, {1, 3}, {0, 2}, {1, 3},
                                                           {4, 6}, {5, 7}, {4, 6}, {5, 7}};
  const std::vector<std::vector<int64_t>> expert_data_groups = {{0, 4}, {1, 5}, {2, 6}, {3, 7},
                                                                {0, 4}, {1, 5}, {2, 6}, {3, 7}};
  for (int64_t rank = 0; rank < 8; ++rank) {
    layout.rank = rank;
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(layout.expert_group(), expert_groups[static_cast<std::size_t>(rank)]);
    EXPECT_EQ(layout.expert_data_group(), expert_data_groups[static_cast<std::size_t>(rank)]);
    EXPECT_EQ(layout.tensor_group(), (std::vector<int64_t>{rank - rank % 2, rank - rank % 2 + 1}));
  }
}

// Expert tensor size 1 (every expert whole): the expert groups run across the tensor ranks, as Megatron's expert
// generator orders them (docs/design/expert-tensor-parallel-plan.md, section 1's rows with ETP1).
TEST(ParallelLayoutTest, ExpertGroupsOfWholeExpertsRunAcrossTheTensorRanks) {
  struct Case {
    int64_t world, data;
    std::vector<std::vector<int64_t>> expert_groups, expert_data_groups;
  };
  const std::vector<Case> cases = {{2, 1, {{0, 1}, {0, 1}}, {{0}, {1}}},
                                   {4, 2, {{0, 1}, {0, 1}, {2, 3}, {2, 3}}, {{0, 2}, {1, 3}, {0, 2}, {1, 3}}},
                                   {8,
                                    4,
                                    {{0, 1}, {0, 1}, {2, 3}, {2, 3}, {4, 5}, {4, 5}, {6, 7}, {6, 7}},
                                    {{0, 2, 4, 6},
                                     {1, 3, 5, 7},
                                     {0, 2, 4, 6},
                                     {1, 3, 5, 7},
                                     {0, 2, 4, 6},
                                     {1, 3, 5, 7},
                                     {0, 2, 4, 6},
                                     {1, 3, 5, 7}}}};
  for (const Case& c : cases) {
    ParallelLayout layout;
    layout.world_size = c.world;
    layout.tensor_size = 2;
    layout.data_size = c.data;
    layout.expert_size = 2;
    layout.expert_tensor_size = 1;
    layout.num_layers = 2;
    EXPECT_EQ(layout.expert_data_size(), c.data);
    for (int64_t rank = 0; rank < c.world; ++rank) {
      layout.rank = rank;
      SCOPED_TRACE("world " + std::to_string(c.world) + ", rank " + std::to_string(rank));
      EXPECT_EQ(layout.expert_group(), c.expert_groups[static_cast<std::size_t>(rank)]);
      EXPECT_EQ(layout.expert_data_group(), c.expert_data_groups[static_cast<std::size_t>(rank)]);
      EXPECT_EQ(layout.expert_rank(), rank % 2);
      EXPECT_EQ(layout.expert_tensor_rank(), 0);
    }
  }
  // Resolved from a configuration: unset is the tensor size, 1 when asked.
  const auto config = launched({{"num_layers", 2},
                                {"num_experts", 4},
                                {"tensor_model_parallel_size", 2},
                                {"sequence_parallel", true},
                                {"expert_model_parallel_size", 2},
                                {"moe_token_dispatcher_type", "alltoall"}},
                               4);
  EXPECT_EQ(make_parallel_layout(config, 3).expert_tensor_size, 2);
  auto whole_experts = config;
  whole_experts.train.expert_tensor_parallel_size = 1;
  EXPECT_EQ(make_parallel_layout(whole_experts, 3).expert_group(), (std::vector<int64_t>{2, 3}));
}

TEST(ParallelLayoutTest, WithoutExpertParallelismEveryRankHoldsEveryExpert) {
  const ParallelLayout layout = make_parallel_layout(launched({{"num_layers", 2}, {"num_experts", 4}}, 2), 1);
  EXPECT_EQ(layout.expert_size, 1);
  EXPECT_EQ(layout.expert_group(), std::vector<int64_t>{1});
  EXPECT_EQ(layout.expert_data_group(), (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(layout.holds_whole_model());
}

}  // namespace
}  // namespace graphed::dist
