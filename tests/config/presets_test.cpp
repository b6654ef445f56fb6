// tests/config/presets_test.cpp — every preset applies, resolves without errors, and has the
// shape DESIGN.md §8 gives it.
#include "graphed/config/presets.h"

#include <gtest/gtest.h>

#include "graphed/config/run_config.h"

namespace graphed::config {
namespace {

RunConfig resolve_preset(const std::string& name) {
  Settings settings;
  apply_settings(settings, *preset_settings(name), "preset " + name);
  Resolution resolution = resolve_run_config(settings);
  for (const auto& issue : resolution.issues.all()) ADD_FAILURE() << name << ": " << format_issue(issue);
  return resolution.config;
}

TEST(PresetsTest, EveryPresetResolvesCleanly) {
  for (const auto& name : preset_names()) {
    EXPECT_FALSE(preset_summary(name).empty()) << name;
    resolve_preset(name);
  }
  EXPECT_EQ(preset_settings("huge"), std::nullopt);
}

TEST(PresetsTest, TinyIsTwoLayersOf128) {
  const RunConfig c = resolve_preset("tiny");
  EXPECT_EQ(c.model.num_layers, 2);
  EXPECT_EQ(c.model.hidden_size, 128);
  EXPECT_EQ(c.model.num_attention_heads, 2);
  EXPECT_EQ(c.model.seq_length, 64);
  EXPECT_EQ(c.train.micro_batch_size, 8);
  EXPECT_EQ(c.model.vocab_size, 1024);
  EXPECT_EQ(c.model.ffn_hidden_size, 512);
  EXPECT_EQ(c.model.normalization, Normalization::kLayerNorm);
  EXPECT_FALSE(c.model.untie_embeddings_and_output_weights);
  EXPECT_EQ(c.model.attention_dropout, 0.0);
  EXPECT_EQ(c.model.hidden_dropout, 0.0);
  EXPECT_TRUE(c.model.bf16);
}

TEST(PresetsTest, SmallAndGpt125m) {
  const RunConfig small = resolve_preset("small");
  EXPECT_EQ(small.model.num_layers, 4);
  EXPECT_EQ(small.model.hidden_size, 256);
  EXPECT_EQ(small.model.seq_length, 128);
  EXPECT_EQ(small.train.micro_batch_size, 8);
  const RunConfig gpt = resolve_preset("gpt-125m");
  EXPECT_EQ(gpt.model.num_layers, 12);
  EXPECT_EQ(gpt.model.hidden_size, 768);
  EXPECT_EQ(gpt.model.num_attention_heads, 12);
  EXPECT_EQ(gpt.model.seq_length, 512);
  EXPECT_EQ(gpt.model.vocab_size, 50304);
  EXPECT_EQ(gpt.model.ffn_hidden_size, 3072);
}

TEST(PresetsTest, MoeSmallIsDropAndPadOnEveryLayer) {
  const RunConfig c = resolve_preset("moe-small");
  EXPECT_EQ(c.model.num_experts, 8);
  EXPECT_EQ(c.model.moe_router_topk, 2);
  EXPECT_EQ(c.model.moe_ffn_hidden_size, 512);
  EXPECT_TRUE(c.model.is_drop_and_pad());
  EXPECT_EQ(c.moe_layers, std::vector<bool>(4, true));
}

TEST(PresetsTest, Moe1bIsLlama1bWithDroplessGroupedExperts) {
  const RunConfig c = resolve_preset("moe-1b");
  const RunConfig dense = resolve_preset("llama-1b");
  EXPECT_EQ(c.model.num_layers, dense.model.num_layers);
  EXPECT_EQ(c.model.hidden_size, dense.model.hidden_size);
  EXPECT_EQ(c.model.num_query_groups, dense.model.num_query_groups);
  EXPECT_EQ(c.model.seq_length, dense.model.seq_length);
  EXPECT_EQ(c.model.num_experts, 8);
  EXPECT_EQ(c.model.moe_router_topk, 2);
  EXPECT_EQ(c.model.moe_ffn_hidden_size, 2048);
  EXPECT_TRUE(c.model.is_grouped_dropless());
  EXPECT_EQ(c.moe_layers, std::vector<bool>(16, true));
}

TEST(PresetsTest, Llama1bIsLlamaStyle) {
  const RunConfig c = resolve_preset("llama-1b");
  EXPECT_EQ(c.model.num_layers, 16);
  EXPECT_EQ(c.model.hidden_size, 2048);
  EXPECT_EQ(c.model.num_attention_heads, 32);
  EXPECT_EQ(c.model.num_query_groups, 8);
  EXPECT_EQ(c.model.ffn_hidden_size, 8192);
  EXPECT_TRUE(c.model.swiglu);
  EXPECT_EQ(c.model.normalization, Normalization::kRmsNorm);
  EXPECT_EQ(c.model.position_embedding_type, PositionEmbedding::kRope);
  EXPECT_FALSE(c.model.add_bias_linear);
  EXPECT_TRUE(c.model.untie_embeddings_and_output_weights);
  EXPECT_EQ(c.model.seq_length, 2048);
}

}  // namespace
}  // namespace graphed::config
