// tests/config/fp8_rules_test.cpp — the FP8 rules (config/fp8_rules.h): each fires with its exact message on
// a configuration that breaks it; a valid FP8 configuration draws no FP8 error; the layer choice of
// --first-last-layers-bf16.
#include "graphed/config/fp8_rules.h"

#include <string>

#include <gtest/gtest.h>

#include "graphed/config/run_config.h"
#include "graphed/config/validation.h"

namespace graphed::config {
namespace {

using nlohmann::json;

/// small's shapes in FP8 (hidden 256, 4 heads, ffn 1024, 8 x 128 tokens), plus `more`.
Resolution resolve_fp8(const json& more) {
  json settings{{"num_layers", 4},   {"hidden_size", 256},     {"num_attention_heads", 4},
                {"seq_length", 128}, {"micro_batch_size", 8},  {"ffn_hidden_size", 1024},
                {"bf16", true},      {"fp8_format", "hybrid"}, {"fp8_recipe", "tensorwise"}};
  if (more.is_object()) settings.update(more);
  Settings resolved;
  apply_settings(resolved, settings, "test");
  return resolve_run_config(resolved);
}

/// The issues of `rule`, formatted, one per line.
std::string issues_of(const Resolution& resolution, const std::string& rule) {
  std::string seen;
  for (const auto& issue : resolution.issues.all()) {
    if (issue.rule == rule) seen += format_issue(issue) + "\n";
  }
  return seen;
}

TEST(Fp8RulesTest, AValidConfigurationHasNoFp8Issue) {
  const Resolution resolution = resolve_fp8({});
  EXPECT_FALSE(resolution.issues.has_errors());
  for (const auto& issue : resolution.issues.all()) EXPECT_NE(issue.rule.rfind("FP-", 0), 0u) << format_issue(issue);
}

TEST(Fp8RulesTest, NeedsBf16AndTheFusedKernels) {
  EXPECT_EQ(issues_of(resolve_fp8({{"bf16", false}}), "FP-1"),
            "error [FP-1]: --fp8-format hybrid needs --bf16 (the weights' FP8 casts are made from bf16 working copies "
            "and the layers between the FP8 GEMMs run in bf16); fix: add --bf16, or drop --fp8-format\n");
  EXPECT_EQ(issues_of(resolve_fp8({{"fused_kernels", false}}), "FP-1"),
            "error [FP-1]: --fp8-format hybrid runs on graphed's fused kernels, but --no-fused-kernels turns them "
            "off; fix: drop --no-fused-kernels, or drop --fp8-format\n");
}

TEST(Fp8RulesTest, RefusesMambaLayers) {
  const Resolution resolution =
      resolve_fp8({{"is_hybrid_model", true}, {"hybrid_override_pattern", "M*M*"}, {"mamba_num_groups", 2}});
  EXPECT_EQ(issues_of(resolution, "FP-1"),
            "error [FP-1]: --fp8-format hybrid does not cover Mamba layers yet (the pattern 'M*M*' has M); fix: drop "
            "--fp8-format for hybrid models with Mamba layers\n");
}

TEST(Fp8RulesTest, RecipeSettingsInRange) {
  EXPECT_EQ(issues_of(resolve_fp8({{"fp8_amax_history_len", 0}}), "FP-2"),
            "error [FP-2]: --fp8-amax-history-len must be >= 1, got 0; fix: pass 1 (the default) or more\n");
  EXPECT_EQ(issues_of(resolve_fp8({{"fp8_margin", -1}}), "FP-2"),
            "error [FP-2]: --fp8-margin must be >= 0, got -1; fix: pass 0 (the default) or more\n");
}

TEST(Fp8RulesTest, FirstLastLayersBf16FollowsMegatronsRules) {
  EXPECT_EQ(issues_of(resolve_fp8({{"fp8_recipe", "delayed"}, {"first_last_layers_bf16", true}}), "FP-3"),
            "error [FP-3]: --first-last-layers-bf16 is not supported with --fp8-recipe delayed (Megatron's rule); "
            "fix: pass --fp8-recipe tensorwise, or drop --first-last-layers-bf16\n");
  EXPECT_EQ(issues_of(resolve_fp8({{"first_last_layers_bf16", true}, {"num_layers_at_end_in_bf16", 3}}), "FP-3"),
            "warning [FP-3]: --num-layers-at-start-in-bf16 1 and --num-layers-at-end-in-bf16 3 cover all 4 layers: "
            "no layer runs FP8 (lower them to train in FP8)\n");
  const Resolution resolution = resolve_fp8({{"first_last_layers_bf16", true}});
  EXPECT_EQ(issues_of(resolution, "FP-3"), "");
  const ModelConfig& model = resolution.config.model;
  EXPECT_FALSE(model.fp8_layer(1));
  EXPECT_TRUE(model.fp8_layer(2));
  EXPECT_TRUE(model.fp8_layer(3));
  EXPECT_FALSE(model.fp8_layer(4));
  EXPECT_TRUE(resolve_fp8({}).config.model.fp8_layer(1));
  EXPECT_FALSE(resolve_fp8({{"fp8_format", nullptr}}).config.model.fp8_layer(2));
}

TEST(Fp8RulesTest, SizesMustBeMultiplesOf16) {
  EXPECT_EQ(issues_of(resolve_fp8({{"ffn_hidden_size", 1000}}), "FP-4"),
            "error [FP-4]: --fp8-format needs every FP8 GEMM size a multiple of 16 (Hopper's FP8 tensor cores), but "
            "--ffn-hidden-size 1000 / 1 tensor ranks is 1000; fix: change that size to a multiple of 16, or drop "
            "--fp8-format\n");
  EXPECT_EQ(issues_of(resolve_fp8({{"seq_length", 100}, {"micro_batch_size", 1}}), "FP-4"),
            "error [FP-4]: --fp8-format needs every FP8 GEMM size a multiple of 16 (Hopper's FP8 tensor cores), but "
            "the tokens of a microbatch (--micro-batch-size 1 x --seq-length 100, the FP8 weight gradients' inner "
            "size) is 100; fix: change that size to a multiple of 16, or pass --no-fp8-wgrad, or drop --fp8-format\n");
  EXPECT_EQ(issues_of(resolve_fp8({{"seq_length", 100}, {"micro_batch_size", 1}, {"fp8_wgrad", false}}), "FP-4"), "");
}

TEST(Fp8RulesTest, NotesThatExpertsStayBf16) {
  const Resolution resolution = resolve_fp8(
      {{"num_experts", 4}, {"moe_expert_capacity_factor", 1.0}, {"moe_pad_expert_input_to_capacity", true}});
  EXPECT_EQ(issues_of(resolution, "FP-5"),
            "note [FP-5]: --fp8-format hybrid: the MoE experts and router stay in bf16 (only attention, dense MLP "
            "and shared-expert linears run FP8)\n");
}

}  // namespace
}  // namespace graphed::config
