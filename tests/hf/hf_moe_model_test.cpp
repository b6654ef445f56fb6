// tests/hf/hf_moe_model_test.cpp — Hugging Face mixtures of experts written here: Mixtral, Qwen2-MoE and
// Qwen3-MoE folders load, with their experts one tensor per expert or fused, into a model whose logits equal
// a float64 reference computed from the tensors (tests/hf/hf_reference_forward.h: softmax over every expert,
// top-k, renormalised or not, token by token); config.json's MoE fields as graphed's settings; every refusal
// with its exact message.
#include "graphed/hf/hf_model.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "hf_moe_folder_for_test.h"
#include "hf_reference_forward.h"

#include "graphed/hf/hf_config.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::hf {
namespace {

using graphed::testing::error_text;
using graphed::testing::HfFolder;
using graphed::testing::MoeSpec;

class HfMoeModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = make_temporary_directory("hf_moe_model_test");
    ASSERT_FALSE(root_.empty());
    at::manual_seed(47);
  }
  void TearDown() override { remove_all(root_); }

  std::string dir(const std::string& name) const { return join_path(root_, name); }

  /// Writes the spec's folder, loads it in float64 and compares the logits of a prompt with the reference.
  HfModel expect_matches_reference(const std::string& name, const MoeSpec& spec) {
    const HfFolder hf = graphed::testing::moe_folder(spec);
    graphed::testing::write_folder(dir(name), hf);
    HfFolder stored = hf;  // the weights as written: float32
    for (auto& item : stored.tensors) item.second = item.second.to(at::kFloat).to(at::kDouble);
    HfModel loaded = load_hf_model(dir(name), at::kCPU, at::kDouble);
    const at::Tensor tokens = at::tensor({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}, at::kLong);
    const at::Tensor expected = graphed::testing::llama_reference(stored, tokens);
    const at::Tensor logits = loaded.model->logits(tokens.view({1, -1})).squeeze(0);
    EXPECT_EQ(logits.sizes(), expected.sizes()) << name;
    if (logits.sizes() == expected.sizes()) {
      const double difference = (logits - expected).abs().max().item<double>();
      EXPECT_LT(difference, 1e-10 * (1.0 + expected.abs().max().item<double>())) << name;
    }
    EXPECT_EQ(loaded.architecture, spec.architecture);
    return loaded;
  }

  std::string config_error(nlohmann::json config) {
    create_directories(dir("config"));
    graphed::testing::write_text(join_path(dir("config"), "config.json"), config.dump());
    return error_text<DataError>([&] { read_hf_config(dir("config")); });
  }
  std::string config_path() const { return join_path(dir("config"), "config.json"); }

  std::string root_;
};

TEST_F(HfMoeModelTest, MixtralRenormalisesItsTopTwoInEitherExpertLayout) {
  MoeSpec spec;
  const HfModel loaded = expect_matches_reference("mixtral", spec);
  const config::ModelConfig& m = loaded.config;
  EXPECT_EQ(m.num_experts, std::optional<int64_t>(4));
  EXPECT_EQ(m.moe_router_topk, 2);
  EXPECT_EQ(m.moe_ffn_hidden_size, std::optional<int64_t>(12));
  EXPECT_FALSE(m.moe_router_pre_softmax) << "Mixtral renormalises: top-k of the logits, softmax over the k";
  EXPECT_FALSE(m.moe_shared_expert_intermediate_size.has_value());
  EXPECT_EQ(m.moe_layer_freq, "1");
  EXPECT_TRUE(m.moe_grouped_gemm) << "dropless with static shapes";
  EXPECT_EQ(m.moe_aux_loss_coeff, 0.0);

  spec.fused = true;  // transformers 5: gate_up_proj [E, 2f, h] and down_proj [E, h, f] under mlp.
  spec.top_k = 3;
  expect_matches_reference("mixtral_fused", spec);
}

TEST_F(HfMoeModelTest, Qwen2MoeWithAGatedSharedExpertAndDenseLayers) {
  MoeSpec spec;
  spec.architecture = "Qwen2MoeForCausalLM";
  spec.layers = 3;
  spec.mlp_only_layers = {0};
  const HfModel loaded = expect_matches_reference("qwen2_moe", spec);
  const config::ModelConfig& m = loaded.config;
  EXPECT_EQ(m.moe_layer_freq, "0,1,1");
  EXPECT_TRUE(m.moe_router_pre_softmax) << "norm_topk_prob false: the k probabilities as they are";
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, std::optional<int64_t>(20));
  EXPECT_TRUE(m.moe_shared_expert_gate);
  EXPECT_EQ(m.ffn_hidden_size, std::optional<int64_t>(24)) << "the dense layer's width";
  EXPECT_TRUE(m.add_qkv_bias);

  spec.fused = true;
  spec.norm_topk_prob = true;
  spec.top_k = 1;
  expect_matches_reference("qwen2_moe_fused", spec);
}

TEST_F(HfMoeModelTest, Qwen3MoeWithNormTopkProbAndASparseStep) {
  MoeSpec spec;
  spec.architecture = "Qwen3MoeForCausalLM";
  spec.layers = 4;
  spec.decoder_sparse_step = 2;
  spec.norm_topk_prob = true;
  spec.experts = 6;
  spec.top_k = 3;
  const HfModel loaded = expect_matches_reference("qwen3_moe", spec);
  EXPECT_EQ(loaded.config.moe_layer_freq, "0,1,0,1");
  EXPECT_FALSE(loaded.config.moe_router_pre_softmax);
  EXPECT_TRUE(loaded.config.qk_layernorm);

  spec.norm_topk_prob = false;
  spec.fused = true;
  spec.decoder_sparse_step = 1;
  expect_matches_reference("qwen3_moe_fused", spec);
}

TEST_F(HfMoeModelTest, MoeFieldsThatDoNotFitAreRefused) {
  const std::string fix = "; fix: save the model again with save_pretrained, or correct the field";
  auto mixtral = graphed::testing::moe_folder(MoeSpec{}).config;
  auto qwen = graphed::testing::moe_folder(MoeSpec{"Qwen3MoeForCausalLM"}).config;
  auto with = [](nlohmann::json config, const std::string& key, const nlohmann::json& value) {
    config[key] = value;
    return config;
  };
  EXPECT_EQ(config_error(with(mixtral, "num_experts_per_tok", 5)),
            "'" + config_path() + "' describes no valid MixtralForCausalLM: num_experts_per_tok 5 exceeds " +
                "num_local_experts 4" + fix);
  EXPECT_EQ(config_error(with(qwen, "num_experts", 1)),
            "unsupported model in '" + config_path() +
                "': num_experts is 1, but graphed supports only 2 or more experts for Qwen3MoeForCausalLM; fix: "
                "pick a model with a supported num_experts (see docs/hf-models.md)");
  EXPECT_EQ(
      config_error(with(qwen, "mlp_only_layers", {0, 2})),
      "'" + config_path() + "' field 'mlp_only_layers' is [0,2], expected a list of layer indices from 0 to 1" + fix);
  EXPECT_EQ(config_error(with(mixtral, "sliding_window", 16)),
            "unsupported model in '" + config_path() +
                "': sliding_window is 16, but graphed supports only null or >= max_position_embeddings (full "
                "attention in every layer) for MixtralForCausalLM; fix: pick a model with a supported "
                "sliding_window (see docs/hf-models.md)");
  // transformers 5 may write either name of the expert count.
  qwen.erase("num_experts");
  qwen["num_local_experts"] = 4;
  create_directories(dir("config"));
  graphed::testing::write_text(config_path(), qwen.dump());
  EXPECT_EQ(read_hf_config(dir("config")).model.num_experts, std::optional<int64_t>(4));
}

TEST_F(HfMoeModelTest, AMissingExpertTensorIsNamed) {
  HfFolder hf = graphed::testing::moe_folder(MoeSpec{});
  hf.tensors.erase("model.layers.1.block_sparse_moe.experts.3.w3.weight");
  graphed::testing::write_folder(dir("missing"), hf);
  const std::string file = join_path(dir("missing"), "model.safetensors");
  EXPECT_EQ(error_text<DataError>([&] { load_hf_model(dir("missing"), at::kCPU); }),
            "'" + file +
                "' lacks 1 tensor that MixtralForCausalLM with this config.json has: "
                "'model.layers.1.block_sparse_moe.experts.3.w3.weight'; fix: check that config.json belongs to these "
                "weights (download the model folder again, or write it with save_pretrained)");
}

TEST_F(HfMoeModelTest, OlmoeNormsQueriesAndKeysAcrossHeads) {
  MoeSpec spec;
  spec.architecture = "OlmoeForCausalLM";
  spec.experts = 8;
  spec.top_k = 3;
  const HfModel loaded = expect_matches_reference("olmoe", spec);
  const config::ModelConfig& m = loaded.config;
  EXPECT_TRUE(m.qk_layernorm);
  EXPECT_TRUE(m.qk_layernorm_across_heads);
  EXPECT_TRUE(m.moe_router_pre_softmax) << "norm_topk_prob false";
  EXPECT_EQ(m.moe_ffn_hidden_size, std::optional<int64_t>(12)) << "OLMoE's experts are intermediate_size wide";
  EXPECT_EQ(m.moe_layer_freq, "1");
  spec.fused = true;
  spec.norm_topk_prob = true;
  expect_matches_reference("olmoe_fused", spec);

  auto config = graphed::testing::moe_folder(spec).config;
  config["clip_qkv"] = 8.0;
  EXPECT_EQ(config_error(config),
            "unsupported model in '" + config_path() +
                "': clip_qkv is 8.0, but graphed supports only null (no clamping of q, k and v) for "
                "OlmoeForCausalLM; fix: pick a model with a supported clip_qkv (see docs/hf-models.md)");
}

}  // namespace
}  // namespace graphed::hf
