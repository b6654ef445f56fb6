// tests/model/attention_test.cpp — the attention features Hugging Face models need, each against its
// definition computed here: the per-head q/k norm (Qwen3), the QKV-only bias (Qwen2), a head size
// other than hidden / heads (--kv-channels), Llama 3.1's RoPE frequency scaling, and a rotary table
// that covers max(seq_length, max_position_embeddings).
#include "graphed/model/attention.h"

#include <cmath>

#include <gtest/gtest.h>

#include "graphed/model/gpt_model.h"
#include "graphed/model/transformer_layer.h"
#include "run_config_for_test.h"

namespace graphed::model {
namespace {

AttentionShape small_shape() {
  AttentionShape shape;
  shape.hidden_size = 16;
  shape.num_heads = 4;
  shape.num_query_groups = 2;
  shape.max_sequence = 8;
  shape.init_std = 0.5;
  shape.output_init_std = 0.5;
  return shape;
}

at::Tensor parameter(torch::nn::Module& module, const std::string& name) {
  for (const auto& item : module.named_parameters()) {
    if (item.key() == name) return item.value();
  }
  return {};
}

at::Tensor buffer(torch::nn::Module& module, const std::string& name) {
  for (const auto& item : module.named_buffers()) {
    if (item.key() == name) return item.value();
  }
  return {};
}

TEST(AttentionTest, QkNormNormalisesEveryHeadOfQueriesAndKeys) {
  at::manual_seed(1);
  for (const bool rms : {true, false}) {
    AttentionShape shape = small_shape();
    shape.qk_norm = true;
    shape.rms_norm = rms;
    shape.norm_epsilon = 1e-6;
    Attention attention(shape);
    attention->to(at::kDouble);
    ASSERT_TRUE(parameter(*attention, "q_norm.weight").defined());
    EXPECT_EQ(parameter(*attention, "q_norm.weight").sizes(), at::IntArrayRef({4})) << "one weight over head_dim";
    EXPECT_EQ(parameter(*attention, "k_norm.weight").sizes(), at::IntArrayRef({4}));
    EXPECT_EQ(parameter(*attention, "k_norm.bias").defined(), !rms) << "LayerNorm has a bias, RMSNorm none";

    const at::Tensor x = at::randn({2, 5, 16}, at::kDouble) * 3.0;
    const auto projection = attention->project(x);
    for (const at::Tensor& t : {projection.query, projection.key}) {
      if (rms) {  // weight 1: each head's vector has mean square 1
        EXPECT_TRUE(at::allclose(t.pow(2).mean(-1), at::ones({}, at::kDouble), 1e-5, 1e-5));
      } else {  // weight 1, bias 0: mean 0, variance 1 per head
        EXPECT_TRUE(at::allclose(t.mean(-1), at::zeros({}, at::kDouble), 1e-6, 1e-6));
        EXPECT_TRUE(at::allclose(t.var(-1, /*unbiased=*/false), at::ones({}, at::kDouble), 1e-5, 1e-5));
      }
    }
    EXPECT_TRUE(projection.value.pow(2).mean(-1).sub(1.0).abs().max().item<double>() > 0.1) << "v is not normed";

    // The weight scales every head alike: q = rmsnorm(q_head) * w, against the definition.
    at::NoGradGuard no_grad;
    parameter(*attention, "q_norm.weight").copy_(at::tensor({0.5, 1.0, 2.0, -1.0}, at::kDouble));
    const at::Tensor raw = at::linear(x, parameter(*attention, "qkv_weight"), parameter(*attention, "qkv_bias"))
                               .narrow(-1, 0, 16)
                               .view({2, 5, 4, 4})
                               .transpose(1, 2);
    const at::Tensor normed =
        rms ? raw * at::rsqrt(raw.pow(2).mean(-1, true) + 1e-6)
            : (raw - raw.mean(-1, true)) * at::rsqrt(raw.var(-1, /*unbiased=*/false, /*keepdim=*/true) + 1e-6);
    const at::Tensor expected = normed * at::tensor({0.5, 1.0, 2.0, -1.0}, at::kDouble);
    EXPECT_TRUE(at::allclose(attention->project(x).query, expected, 1e-9, 1e-9)) << (rms ? "RMSNorm" : "LayerNorm");
  }
}

TEST(AttentionTest, QkvBiasWithoutOtherBiases) {
  at::manual_seed(2);
  AttentionShape shape = small_shape();
  shape.bias = false;
  shape.qkv_bias = true;
  Attention attention(shape);
  const at::Tensor qkv_bias = parameter(*attention, "qkv_bias");
  ASSERT_TRUE(qkv_bias.defined());
  EXPECT_EQ(qkv_bias.sizes(), at::IntArrayRef({(4 + 2 * 2) * 4}));
  EXPECT_FALSE(parameter(*attention, "proj_bias").defined());
  at::NoGradGuard no_grad;
  qkv_bias.copy_(at::randn({32}));
  const at::Tensor x = at::randn({1, 3, 16});
  const at::Tensor qkv = at::linear(x, parameter(*attention, "qkv_weight"), qkv_bias);
  const auto projection = attention->project(x);
  EXPECT_TRUE(at::allclose(projection.query, qkv.narrow(-1, 0, 16).view({1, 3, 4, 4}).transpose(1, 2)));
  EXPECT_TRUE(at::allclose(projection.value, qkv.narrow(-1, 24, 8).view({1, 3, 2, 4}).transpose(1, 2)));

  shape.qkv_bias = false;
  Attention plain(shape);
  EXPECT_TRUE(plain->named_parameters().size() == 2) << "qkv_weight and proj_weight only";
}

TEST(AttentionTest, KvChannelsSetsTheHeadSize) {
  at::manual_seed(3);
  AttentionShape shape = small_shape();
  shape.head_dim = 8;  // 4 heads x 8 = 32 != hidden 16 (Qwen3-0.6B: 16 x 128 = 2048 != 1024)
  shape.rope = true;
  Attention attention(shape);
  EXPECT_EQ(attention->head_dim(), 8);
  EXPECT_EQ(parameter(*attention, "qkv_weight").sizes(), at::IntArrayRef({(4 + 2 * 2) * 8, 16}));
  EXPECT_EQ(parameter(*attention, "proj_weight").sizes(), at::IntArrayRef({16, 4 * 8}));
  EXPECT_EQ(buffer(*attention, "rope_cos").sizes(), at::IntArrayRef({8, 4}));
  const at::Tensor x = at::randn({2, 5, 16});
  const auto projection = attention->project(x);
  EXPECT_EQ(projection.query.sizes(), at::IntArrayRef({2, 4, 5, 8}));
  EXPECT_EQ(projection.key.sizes(), at::IntArrayRef({2, 2, 5, 8}));
  EXPECT_EQ(attention->forward(x).sizes(), at::IntArrayRef({2, 5, 16}));

  // Through the config: hidden 24 does not split into 5 heads, but --kv-channels gives the size.
  const config::RunConfig config = graphed::testing::run_config({{"hidden_size", 24},
                                                                 {"num_attention_heads", 5},
                                                                 {"kv_channels", 6},
                                                                 {"position_embedding_type", "rope"},
                                                                 {"seq_length", 8},
                                                                 {"attention_dropout", 0.0},
                                                                 {"hidden_dropout", 0.0}});
  GptModel model(config.model, config.moe_layers);
  EXPECT_EQ(parameter(*model, "layers.0.attention.qkv_weight").sizes(), at::IntArrayRef({15 * 6, 24}));
  EXPECT_EQ(parameter(*model, "layers.0.attention.proj_weight").sizes(), at::IntArrayRef({24, 30}));
  EXPECT_EQ(model->logits(at::zeros({1, 8}, at::kLong)).sizes(), at::IntArrayRef({1, 8, 1024}));
}

/// Llama 3.1's scaling of one inverse frequency, written as the branches of Meta's reference
/// (apply_scaling in llama/model.py): keep short wavelengths, divide long ones, blend between.
double llama3_scaled(double frequency, double factor, double low, double high, double original) {
  const double wavelength = 2 * M_PI / frequency;
  if (wavelength < original / high) return frequency;
  if (wavelength > original / low) return frequency / factor;
  const double smooth = (original / wavelength - low) / (high - low);
  return (1 - smooth) * frequency / factor + smooth * frequency;
}

TEST(AttentionTest, Llama3RopeScalingFollowsTheFormula) {
  AttentionShape shape = small_shape();
  shape.rotary_base = 500000.0;
  const int64_t head_dim = 64;
  const at::Tensor plain = rope_inverse_frequencies(shape, head_dim);
  EXPECT_TRUE(at::equal(plain, 1.0 / at::pow(500000.0, at::arange(0, 64, 2, at::kDouble) / 64.0)))
      << "without scaling, the frequencies are the unscaled ones, bit for bit";

  shape.rope_scaling = true;
  shape.rope_scaling_options = {32.0, 1.0, 4.0, 8192};  // Llama 3.2
  const at::Tensor scaled = rope_inverse_frequencies(shape, head_dim);
  int kept = 0, divided = 0, blended = 0;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double f = plain[i].item<double>();
    const double expected = llama3_scaled(f, 32.0, 1.0, 4.0, 8192.0);
    EXPECT_NEAR(scaled[i].item<double>(), expected, 1e-15 + 1e-12 * expected) << "frequency " << i;
    kept += expected == f;
    divided += expected == f / 32.0;
    blended += expected != f && expected != f / 32.0;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0) << "the test covers all three branches";

  // The rotary table holds cos and sin of position x scaled frequency.
  shape.rope = true;
  shape.head_dim = head_dim;
  shape.num_heads = 2;
  shape.num_query_groups = 2;
  shape.hidden_size = 128;
  shape.max_sequence = 300;
  Attention attention(shape);
  const at::Tensor angles = at::outer(at::arange(300, at::kDouble), scaled);
  EXPECT_TRUE(at::equal(buffer(*attention, "rope_cos"), angles.cos().to(at::kFloat)));
  EXPECT_TRUE(at::equal(buffer(*attention, "rope_sin"), angles.sin().to(at::kFloat)));
}

TEST(AttentionTest, RotaryTableCoversMaxPositionEmbeddings) {
  at::manual_seed(4);
  const config::RunConfig config = graphed::testing::run_config({{"hidden_size", 16},
                                                                 {"num_attention_heads", 2},
                                                                 {"position_embedding_type", "rope"},
                                                                 {"seq_length", 8},
                                                                 {"max_position_embeddings", 40},
                                                                 {"attention_dropout", 0.0},
                                                                 {"hidden_dropout", 0.0}});
  TransformerLayer layer(config.model, 1, false);
  EXPECT_EQ(buffer(*layer, "attention.rope_cos").size(0), 40);
  const at::Tensor x = at::randn({1, 2, 16});
  const auto late = layer->named_children()["attention"]->as<AttentionImpl>()->project(
      x, at::tensor({38, 39}, at::kLong).view({1, 2}));
  EXPECT_EQ(late.query.sizes(), at::IntArrayRef({1, 2, 2, 8}));

  const config::RunConfig longer = graphed::testing::run_config({{"hidden_size", 16},
                                                                 {"num_attention_heads", 2},
                                                                 {"position_embedding_type", "rope"},
                                                                 {"seq_length", 32},
                                                                 {"max_position_embeddings", 16}});
  TransformerLayer training(longer.model, 1, false);
  EXPECT_EQ(buffer(*training, "attention.rope_cos").size(0), 32) << "never shorter than the sequence";
}

}  // namespace
}  // namespace graphed::model
