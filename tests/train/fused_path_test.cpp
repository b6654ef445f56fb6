// tests/train/fused_path_test.cpp — the fused path's plumbing on the CPU, where every fused operation is
// its ATen reference: AdamW over flat buffers with working copies steps like the per-parameter AdamW,
// keeps the module's parameters in its flat buffer and refreshes the copies; a GPT-2 style, a Llama style, a
// grouped-MoE and a hybrid model trained through the fused path (copies in fp32) give the ATen path's losses and
// weights bit for bit.
#include <gtest/gtest.h>

#include <memory>

#include "graphed/kernels/accumulation_listeners.h"
#include "graphed/model/fused_path.h"
#include "graphed/model/gpt_model.h"
#include "graphed/train/adamw.h"
#include "run_config_for_test.h"

namespace graphed::train {
namespace {

TEST(FlatAdamWTest, StepsLikeThePerParameterAdamWAndRefreshesTheCopies) {
  at::manual_seed(2);
  const at::Tensor a0 = at::randn({5, 3}, at::kDouble), b0 = at::randn({4}, at::kDouble);
  at::Tensor a = a0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
  at::Tensor c = a0.clone().requires_grad_(true), d = b0.clone().requires_grad_(true);
  AdamWOptions flat_options{0.9, 0.95, 1e-8, 0.1};
  flat_options.working_copies = at::kDouble;
  AdamW flat({{"a", a}, {"b", b}}, flat_options);
  AdamW separate({{"a", c}, {"b", d}}, AdamWOptions{0.9, 0.95, 1e-8, 0.1});
  EXPECT_EQ(b.data_ptr<double>(), a.data_ptr<double>() + a.numel()) << "the parameters live in one flat buffer";
  for (int step = 0; step < 4; ++step) {
    const at::Tensor target = at::randn({5, 3}, at::kDouble);
    for (AdamW* optimizer : {&flat, &separate}) {
      optimizer->zero_grad();
      optimizer->set_learning_rate(3e-3);
    }
    ((a - target).pow(2).sum() + b.pow(3).sum()).backward();
    ((c - target).pow(2).sum() + d.pow(3).sum()).backward();
    flat.step(at::full({}, 1.5, at::kDouble));
    separate.step(at::full({}, 1.5, at::kDouble));
  }
  EXPECT_TRUE(at::equal(a, c)) << a - c;
  EXPECT_TRUE(at::equal(b, d)) << b - d;
  const auto copies = flat.working_copies();
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_TRUE(at::equal(copies[0].second, a));
  EXPECT_TRUE(at::equal(copies[1].second, b));
  {
    at::NoGradGuard no_grad;
    a.fill_(7.0);  // as a checkpoint load writes the parameters
  }
  flat.refresh_working_copies();
  EXPECT_TRUE(at::equal(copies[0].second, a));
  EXPECT_EQ(flat.state().size(), 7u);  // two moments and a step per parameter, and lr
  EXPECT_TRUE(separate.working_copies().empty());
}

/// Losses and final weights of `steps` iterations, through the fused path (its gradients added into .grad in place
/// where `accumulate`) or the ATen path.
std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> train(const nlohmann::json& settings, bool fused, int steps,
                                                                  bool accumulate = false) {
  const config::RunConfig config = testing::run_config(settings);
  at::manual_seed(11);
  model::GptModel model(config.model, config.moe_layers);
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  for (const auto& item : model->named_parameters()) parameters.emplace_back(item.key(), item.value());
  AdamWOptions options;
  if (fused) options.working_copies = at::kFloat;
  AdamW optimizer(parameters, options);
  if (fused) {
    model->use_kernel_path(std::make_shared<model::FusedPath>(optimizer.working_copies(), at::kFloat, accumulate));
  }
  const at::Tensor tokens = at::randint(0, config.model.vocab_size, {2, config.model.seq_length + 1});
  std::vector<at::Tensor> losses;
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    optimizer.set_learning_rate(1e-2);
    const model::GptOutput output =
        model->forward(tokens.narrow(1, 0, config.model.seq_length), tokens.narrow(1, 1, config.model.seq_length), 0);
    output.loss.backward();
    optimizer.step(std::nullopt);
    losses.push_back(output.loss.detach());
  }
  std::vector<at::Tensor> weights;
  for (const auto& p : model->parameters()) weights.push_back(p.detach().clone());
  return {losses, weights};
}

void expect_same_training(const nlohmann::json& settings, const char* what, bool accumulate = false) {
  const auto aten = train(settings, false, 3);
  const auto fused = train(settings, true, 3, accumulate);
  for (std::size_t i = 0; i < aten.first.size(); ++i) {
    EXPECT_TRUE(at::equal(aten.first[i], fused.first[i]))
        << what << ", step " << i << ": " << aten.first[i].item<double>() << " against "
        << fused.first[i].item<double>();
  }
  ASSERT_EQ(aten.second.size(), fused.second.size());
  for (std::size_t i = 0; i < aten.second.size(); ++i)
    EXPECT_TRUE(at::equal(aten.second[i], fused.second[i])) << what << ", weight " << i;
}

TEST(FusedPathTest, GptStyleTrainsLikeTheAtenPathOnTheCpu) {
  expect_same_training({{"num_layers", 2},
                        {"hidden_size", 32},
                        {"num_attention_heads", 4},
                        {"seq_length", 8},
                        {"max_position_embeddings", 8},
                        {"vocab_size", 50},
                        {"attention_dropout", 0.0},
                        {"hidden_dropout", 0.0}},
                       "GPT-2 style");
}

TEST(FusedPathTest, LlamaStyleTrainsLikeTheAtenPathOnTheCpu) {
  expect_same_training({{"num_layers", 2},
                        {"hidden_size", 32},
                        {"num_attention_heads", 4},
                        {"group_query_attention", true},
                        {"num_query_groups", 2},
                        {"ffn_hidden_size", 48},
                        {"swiglu", true},
                        {"normalization", "RMSNorm"},
                        {"position_embedding_type", "rope"},
                        {"add_bias_linear", false},
                        {"untie_embeddings_and_output_weights", true},
                        {"seq_length", 8},
                        {"max_position_embeddings", 8},
                        {"vocab_size", 50},
                        {"attention_dropout", 0.0},
                        {"hidden_dropout", 0.0}},
                       "Llama style");
}

// The MoE's grouped experts read their weights through the path (KernelPath::working_weight): the fused path's copies,
// whose gradients reach the masters through autograd or, accumulating, straight into .grad.
TEST(FusedPathTest, GroupedMoeTrainsLikeTheAtenPathOnTheCpu) {
  const nlohmann::json settings = {{"num_layers", 2},          {"hidden_size", 32},
                                   {"num_attention_heads", 4}, {"num_experts", 4},
                                   {"moe_router_topk", 2},     {"moe_ffn_hidden_size", 24},
                                   {"moe_grouped_gemm", true}, {"moe_aux_loss_coeff", 0.01},
                                   {"seq_length", 8},          {"max_position_embeddings", 8},
                                   {"vocab_size", 50},         {"attention_dropout", 0.0},
                                   {"hidden_dropout", 0.0}};
  expect_same_training(settings, "grouped MoE");
  int64_t heard = 0;  // the experts' weights (2 a layer) added into .grad in place, each step
  const int64_t listener = kernels::add_accumulation_listener([&](const at::Tensor& parameter) {
    if (parameter.dim() == 3) ++heard;
  });
  expect_same_training(settings, "grouped MoE, accumulating in place", /*accumulate=*/true);
  kernels::remove_accumulation_listener(listener);
  EXPECT_GT(heard, 0);
}

TEST(FusedPathTest, HybridTrainsLikeTheAtenPathOnTheCpu) {
  expect_same_training({{"num_layers", 4},
                        {"hybrid_override_pattern", "M*M-"},
                        {"hidden_size", 32},
                        {"num_attention_heads", 4},
                        {"mamba_state_dim", 8},
                        {"mamba_head_dim", 16},
                        {"mamba_num_groups", 2},
                        {"mamba_chunk_size", 4},
                        {"seq_length", 8},
                        {"max_position_embeddings", 8},
                        {"vocab_size", 50},
                        {"attention_dropout", 0.0},
                        {"hidden_dropout", 0.0}},
                       "Mamba-hybrid");
}

}  // namespace
}  // namespace graphed::train
