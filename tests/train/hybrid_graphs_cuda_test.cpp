// tests/train/hybrid_graphs_cuda_test.cpp — Mamba-hybrid training under every CUDA-graph implementation
// against eager on the GPU (issue 14): hybrid-small (M*M-M*ME: Mamba, attention, MLP and a drop-and-pad
// MoE layer), 50 steps of 2 microbatches. local and transformer_engine with modules {whole layer},
// {mamba}, {attn, mamba} and {attn, mamba, moe_router, moe_preprocess}; full_iteration with the
// optimizer eager and in the graph. Losses, evaluation and every final parameter bitwise equal to eager
// (eager first checked reproducible).
#include <gtest/gtest.h>

#include "cuda_test.h"
#include "train/train_run_for_test.h"

namespace graphed::train {
namespace {

using graphed::testing::GraphCase;

struct HybridCase {
  std::string impl;
  GraphCase graph;
};

void PrintTo(const HybridCase& c, std::ostream* out) { *out << c.impl << "_" << c.graph.name; }

using HybridGraphsCudaTest = graphed::testing::CudaTestWithParam<HybridCase>;

TEST_P(HybridGraphsCudaTest, FiftyStepsOfTwoMicrobatchesEqualEager) {
  graphed::testing::expect_graphed_run_equals_eager(GetParam().graph, GetParam().impl, 50);
}

std::vector<HybridCase> cases() {
  std::vector<HybridCase> all;
  for (const std::string impl : {"local", "transformer_engine"}) {
    all.push_back({impl, GraphCase{"whole_layer", "hybrid-small", {}}});
    all.push_back({impl, GraphCase{"mamba", "hybrid-small", {"mamba"}}});
    all.push_back({impl, GraphCase{"attn_mamba", "hybrid-small", {"attn", "mamba"}}});
    all.push_back(
        {impl,
         GraphCase{"attn_mamba_router_preprocess", "hybrid-small", {"attn", "mamba", "moe_router", "moe_preprocess"}}});
  }
  all.push_back({"full_iteration", GraphCase{"optimizer_eager", "hybrid-small", {}}});
  all.push_back(
      {"full_iteration", GraphCase{"optimizer_in_graph", "hybrid-small", {}, {}, {{"optimizer_cuda_graph", true}}}});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Implementations, HybridGraphsCudaTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.impl + "_" + info.param.graph.name; });

}  // namespace
}  // namespace graphed::train
