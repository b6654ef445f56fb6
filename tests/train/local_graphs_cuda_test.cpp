// tests/train/local_graphs_cuda_test.cpp — --cuda-graph-impl local against eager on the GPU, 50 steps:
// losses, the evaluation loss (through forward-only graphs) and every final parameter bitwise equal to
// eager (eager first checked reproducible), for every module selection on tiny, small, moe-small
// (drop-and-pad; dropless with moe_router moe_preprocess), a Llama-style model (RMSNorm, RoPE, SwiGLU,
// GQA, untied output, no biases, bf16) and 4 microbatches. Also: dropout follows eager's random stream,
// a call no graph matches names the argument and both signatures, delete then record again.
#include <gtest/gtest.h>

#include "cuda_test.h"
#include "graphed/train/local_graph_runner.h"
#include "graphed/train/trainer.h"
#include "train/train_run_for_test.h"

namespace graphed::train {
namespace {

using graphed::testing::dropless_moe;
using graphed::testing::GraphCase;
using graphed::testing::grouped_dropless_moe;
using graphed::testing::TrainRun;

/// small as a Llama-style model.
const nlohmann::json kLlamaStyle{{"normalization", "RMSNorm"},
                                 {"position_embedding_type", "rope"},
                                 {"swiglu", true},
                                 {"add_bias_linear", false},
                                 {"untie_embeddings_and_output_weights", true},
                                 {"group_query_attention", true},
                                 {"num_query_groups", 2},
                                 {"ffn_hidden_size", nullptr}};

using LocalGraphsCudaTest = graphed::testing::CudaTestWithParam<GraphCase>;

TEST_P(LocalGraphsCudaTest, FiftyStepsEqualEager) {
  const TrainRun graphed = graphed::testing::expect_graphed_run_equals_eager(GetParam(), "local", 50);
  EXPECT_GT(graphed.graphs_evaluated, graphed.graphs) << "evaluation captures forward-only graphs";
}

INSTANTIATE_TEST_SUITE_P(
    Modules, LocalGraphsCudaTest,
    ::testing::Values(GraphCase{"tiny_whole_layer", "tiny", {}}, GraphCase{"tiny_attn", "tiny", {"attn"}},
                      GraphCase{"tiny_mlp", "tiny", {"mlp"}}, GraphCase{"tiny_attn_mlp", "tiny", {"attn", "mlp"}},
                      GraphCase{"small_whole_layer", "small", {}},
                      GraphCase{"small_attn_mlp", "small", {"attn", "mlp"}},
                      GraphCase{"small_four_microbatches", "small", {}, {{"global_batch_size", 32}}},
                      GraphCase{"small_without_stage_units", "small", {}, {}, {{"cuda_graph_stage_units", false}}},
                      GraphCase{"moe_whole_layer", "moe-small", {}},
                      GraphCase{"moe_attn_moe", "moe-small", {"attn", "moe"}},
                      GraphCase{"moe_grouped_attn_moe", "moe-small", {"attn", "moe"}, grouped_dropless_moe()},
                      GraphCase{"moe_grouped_whole_layer", "moe-small", {}, grouped_dropless_moe()},
                      GraphCase{"moe_router_preprocess", "moe-small", {"moe_router", "moe_preprocess"}},
                      GraphCase{"moe_dropless_attn_router_preprocess",
                                "moe-small",
                                {"attn", "moe_router", "moe_preprocess"},
                                dropless_moe()},
                      GraphCase{"llama_style_whole_layer", "small", {}, kLlamaStyle},
                      GraphCase{"llama_style_attn_mlp", "small", {"attn", "mlp"}, kLlamaStyle}),
    [](const auto& info) { return info.param.name; });

using LocalGraphsCudaDropoutTest = graphed::testing::CudaTest;
using LocalGraphsCudaErrorTest = graphed::testing::CudaTest;
using LocalGraphsCudaDeleteTest = graphed::testing::CudaTest;

TEST_F(LocalGraphsCudaDropoutTest, DropoutFollowsTheEagerRandomStream) {
  graphed::testing::expect_dropout_follows_eager("local");
}

TEST_F(LocalGraphsCudaErrorTest, CallThatNoGraphMatchesNamesTheArgumentAndBothSignatures) {
  const std::string message = graphed::testing::error_of_other_batch_after_capture(
      {{"cuda_graph_impl", "local"}, {"cuda_graph_warmup_steps", 1}});
  EXPECT_EQ(
      message.rfind("unit embedding: no captured graph matches this call (1 recorded for this unit):\n"
                    "  - embedding (runner 0): argument 'tokens' (argument 0): got [2, 64] Long on cuda:0, no grad; "
                    "recorded [8, 64] Long on cuda:0, no grad; fix: ",
                    0),
      0u)
      << message;
}

TEST_F(LocalGraphsCudaDeleteTest, DeleteThenRecordAgainKeepsEagerLosses) {
  graphed::testing::expect_delete_then_capture_again_keeps_eager_losses("local", [](const Trainer& trainer) {
    const auto& local = dynamic_cast<const LocalGraphRunner&>(trainer.runner());
    EXPECT_EQ(local.registry().phase(), capture::LocalPhase::kCreated)
        << "recorded and captured again after the delete";
  });
}

}  // namespace
}  // namespace graphed::train
