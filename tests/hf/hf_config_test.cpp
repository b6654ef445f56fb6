// tests/hf/hf_config_test.cpp — config.json as graphed's ModelConfig: each architecture's mapping,
// transformers' class defaults for missing fields, both transformers 4 and 5 spellings, and every
// refusal with its exact message.
#include "graphed/hf/hf_config.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "hf_folder_for_test.h"

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::hf {
namespace {

using graphed::testing::error_text;
using nlohmann::json;

class HfConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temporary_directory("hf_config_test");
    ASSERT_FALSE(dir_.empty());
    path_ = join_path(dir_, "config.json");
  }
  void TearDown() override { remove_all(dir_); }

  HfConfig read(const json& config) {
    graphed::testing::write_text(path_, config.dump());
    return read_hf_config(dir_);
  }
  std::string error_of(const json& config) {
    graphed::testing::write_text(path_, config.dump());
    return error_text<DataError>([&] { read_hf_config(dir_); });
  }
  static json llama() { return graphed::testing::llama_folder(graphed::testing::LlamaSpec{}).config; }
  static json with(json config, const json& changes) {
    for (const auto& [key, value] : changes.items()) {
      if (value.is_null())
        config.erase(key);
      else
        config[key] = value;
    }
    return config;
  }
  std::string unsupported(const std::string& field, const std::string& value, const std::string& supported,
                          const std::string& owner) const {
    return "unsupported model in '" + path_ + "': " + field + " is " + value + ", but graphed supports only " +
           supported + " for " + owner + "; fix: pick a model with a supported " + field + " (see docs/hf-models.md)";
  }

  std::string dir_;
  std::string path_;
};

TEST_F(HfConfigTest, LlamaMapsToARopeSwigluRmsNormModel) {
  const HfConfig hf = read(llama());
  const config::ModelConfig& m = hf.model;
  EXPECT_EQ(hf.architecture, HfArchitecture::kLlama);
  EXPECT_EQ(m.num_layers, 2);
  EXPECT_EQ(m.hidden_size, 16);
  EXPECT_EQ(m.num_attention_heads, 4);
  EXPECT_TRUE(m.group_query_attention);
  EXPECT_EQ(m.num_query_groups, std::optional<int64_t>(2));
  EXPECT_FALSE(m.kv_channels.has_value()) << "head_dim 4 = 16 / 4";
  EXPECT_EQ(m.ffn_hidden_size, std::optional<int64_t>(24));
  EXPECT_EQ(m.vocab_size, 50);
  EXPECT_EQ(m.max_position_embeddings, std::optional<int64_t>(64));
  EXPECT_EQ(m.seq_length, 64);
  EXPECT_EQ(m.normalization, config::Normalization::kRmsNorm);
  EXPECT_EQ(m.norm_epsilon, 1e-5);
  EXPECT_TRUE(m.swiglu);
  EXPECT_EQ(m.position_embedding_type, config::PositionEmbedding::kRope);
  EXPECT_EQ(m.rotary_base, 10000.0);
  EXPECT_FALSE(m.use_rope_scaling);
  EXPECT_FALSE(m.add_bias_linear);
  EXPECT_FALSE(m.add_qkv_bias);
  EXPECT_FALSE(m.qk_layernorm);
  EXPECT_TRUE(m.untie_embeddings_and_output_weights);
  EXPECT_EQ(m.attention_dropout, 0.0);
  EXPECT_EQ(m.hidden_dropout, 0.0);
  EXPECT_EQ(hf.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(hf.bos_token_id, std::optional<int64_t>(1));
  EXPECT_EQ(hf.dtype, std::optional<std::string>("float32"));
}

TEST_F(HfConfigTest, MissingFieldsTakeTheClassDefaults) {
  const json bare = with(llama(), {{"num_key_value_heads", nullptr},
                                   {"head_dim", nullptr},
                                   {"rms_norm_eps", nullptr},
                                   {"rope_theta", nullptr},
                                   {"rope_scaling", nullptr},
                                   {"tie_word_embeddings", nullptr},
                                   {"max_position_embeddings", nullptr},
                                   {"torch_dtype", nullptr},
                                   {"eos_token_id", nullptr},
                                   {"bos_token_id", nullptr},
                                   {"hidden_act", nullptr}});
  HfConfig hf = read(bare);
  EXPECT_EQ(hf.model.num_query_groups, std::optional<int64_t>(4)) << "Llama: one key/value head per head";
  EXPECT_EQ(hf.model.max_position_embeddings, std::optional<int64_t>(2048));
  EXPECT_EQ(hf.model.norm_epsilon, 1e-6);
  EXPECT_EQ(hf.model.rotary_base, 10000.0);
  EXPECT_FALSE(hf.tie_word_embeddings);
  EXPECT_FALSE(hf.dtype.has_value());
  EXPECT_TRUE(hf.eos_token_ids.empty());
  EXPECT_FALSE(hf.bos_token_id.has_value());

  hf = read(with(bare, {{"architectures", {"Qwen3ForCausalLM"}}, {"num_attention_heads", 32}, {"hidden_size", 64}}));
  EXPECT_EQ(hf.model.num_query_groups, std::optional<int64_t>(32)) << "Qwen3Config's num_key_value_heads";
  EXPECT_EQ(hf.model.kv_channels, std::optional<int64_t>(128)) << "Qwen3Config's head_dim";
  EXPECT_EQ(hf.model.max_position_embeddings, std::optional<int64_t>(32768));
  EXPECT_TRUE(hf.model.qk_layernorm);
  hf = read(with(bare, {{"architectures", {"Qwen3ForCausalLM"}}, {"num_key_value_heads", 2}, {"head_dim", 6}}));
  EXPECT_EQ(hf.model.kv_channels, std::optional<int64_t>(6));
  EXPECT_EQ(hf.model.head_dim(), 6);
}

TEST_F(HfConfigTest, QwenBiasesAndGpt2Fields) {
  HfConfig hf = read(with(llama(), {{"architectures", {"Qwen2ForCausalLM"}}, {"attention_bias", nullptr}}));
  EXPECT_TRUE(hf.qkv_bias);
  EXPECT_FALSE(hf.attention_bias) << "Qwen2's o_proj has no bias";
  EXPECT_TRUE(hf.model.add_qkv_bias);
  EXPECT_FALSE(hf.model.add_bias_linear);

  hf = read(with(llama(), {{"architectures", {"Qwen3ForCausalLM"}}, {"attention_bias", true}}));
  EXPECT_TRUE(hf.model.add_bias_linear) << "q/k/v/o biases; the MLP's are zero-filled by the loader";

  hf = read({{"model_type", "gpt2"},
             {"hidden_size", 32},
             {"num_hidden_layers", 3},
             {"n_head", 4},
             {"vocab_size", 99},
             {"activation_function", "gelu"}});
  EXPECT_EQ(hf.architecture, HfArchitecture::kGpt2) << "model_type when architectures is missing";
  EXPECT_EQ(hf.model.hidden_size, 32) << "GPT2Config's attribute_map: hidden_size is n_embd";
  EXPECT_EQ(hf.model.num_layers, 3);
  EXPECT_EQ(hf.model.ffn_hidden_size, std::optional<int64_t>(128));
  EXPECT_EQ(hf.model.max_position_embeddings, std::optional<int64_t>(1024));
  EXPECT_FALSE(hf.model.openai_gelu) << "gelu is the exact GELU";
  EXPECT_EQ(hf.model.normalization, config::Normalization::kLayerNorm);
  EXPECT_EQ(hf.model.position_embedding_type, config::PositionEmbedding::kLearnedAbsolute);
  EXPECT_TRUE(hf.model.add_bias_linear);
  EXPECT_TRUE(hf.tie_word_embeddings);
  EXPECT_FALSE(hf.model.untie_embeddings_and_output_weights);
}

TEST_F(HfConfigTest, RopeScalingInBothSpellings) {
  const json llama3 = {{"rope_type", "llama3"},
                       {"factor", 32.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  HfConfig hf = read(with(llama(), {{"rope_scaling", llama3}, {"rope_theta", 500000.0}}));
  EXPECT_TRUE(hf.model.use_rope_scaling);
  EXPECT_EQ(hf.model.rope_scaling_factor, 32.0);
  EXPECT_EQ(hf.model.rope_scaling_low_freq_factor, 1.0);
  EXPECT_EQ(hf.model.rope_scaling_high_freq_factor, 4.0);
  EXPECT_EQ(hf.model.rope_scaling_original_max_position_embeddings, 8192);
  EXPECT_EQ(hf.model.rotary_base, 500000.0);

  json v5 = llama3;
  v5["rope_theta"] = 250000.0;
  v5.erase("original_max_position_embeddings");
  hf = read(with(llama(), {{"rope_parameters", v5}, {"rope_theta", nullptr}, {"rope_scaling", nullptr}}));
  EXPECT_EQ(hf.model.rotary_base, 250000.0);
  EXPECT_EQ(hf.model.rope_scaling_original_max_position_embeddings, 64) << "defaults to max_position_embeddings";

  hf = read(with(llama(), {{"rope_scaling", {{"type", "default"}}}}));
  EXPECT_FALSE(hf.model.use_rope_scaling) << "transformers 4's old key 'type'";
}

TEST_F(HfConfigTest, FolderAndFileProblems) {
  const std::string missing = join_path(dir_, "none");
  EXPECT_EQ(error_text<DataError>([&] { read_hf_config(missing); }),
            "model folder '" + missing +
                "' does not exist; fix: pass a folder written by save_pretrained "
                "(config.json and model.safetensors), e.g. a download of a Hugging Face model");
  EXPECT_EQ(error_text<DataError>([&] { read_hf_config(dir_); }),
            "model folder '" + dir_ +
                "' has no config.json; fix: pass a folder written by save_pretrained "
                "(config.json and model.safetensors)");
  graphed::testing::write_text(path_, "{\"hidden_size\": ");
  EXPECT_EQ(error_text<DataError>([&] { read_hf_config(dir_); }),
            "'" + path_ +
                "' is not JSON (syntax error at byte 17); fix: download the model folder again or write it "
                "with save_pretrained");
  graphed::testing::write_text(path_, "[1]");
  EXPECT_EQ(error_text<DataError>([&] { read_hf_config(dir_); }),
            "'" + path_ +
                "' is a JSON array, expected an object; fix: download the model folder again or write it "
                "with save_pretrained");
  EXPECT_EQ(error_of(json::object()),
            "'" + path_ +
                "' has neither 'architectures' nor 'model_type', so the model class is unknown; fix: save "
                "the model again with save_pretrained, or correct the field");
  graphed::testing::write_text(path_, llama().dump());
  graphed::testing::write_text(join_path(dir_, "generation_config.json"), R"({"eos_token_id": "</s>"})");
  EXPECT_EQ(error_text<DataError>([&] { read_hf_config(dir_); }),
            "'" + join_path(dir_, "generation_config.json") +
                "' field 'eos_token_id' is \"</s>\", expected a token "
                "id >= 0 or a list of them; fix: save the model again with save_pretrained, or correct the field");
}

TEST_F(HfConfigTest, FieldsOfTheWrongTypeOrSize) {
  const std::string fix = "; fix: save the model again with save_pretrained, or correct the field";
  EXPECT_EQ(error_of(with(llama(), {{"hidden_size", nullptr}})),
            "'" + path_ + "' has no field 'hidden_size', which LlamaForCausalLM needs" + fix);
  EXPECT_EQ(error_of(with(llama(), {{"num_attention_heads", "4"}})),
            "'" + path_ + "' field 'num_attention_heads' is \"4\", expected an integer >= 1" + fix);
  EXPECT_EQ(error_of(with(llama(), {{"num_key_value_heads", 3}})),
            "'" + path_ +
                "' describes no valid LlamaForCausalLM: num_attention_heads 4 is not divisible by "
                "num_key_value_heads 3" +
                fix);
  EXPECT_EQ(error_of(with(llama(), {{"hidden_size", 18}, {"head_dim", nullptr}})),
            "'" + path_ +
                "' describes no valid LlamaForCausalLM: hidden_size 18 is not divisible by "
                "num_attention_heads 4 and head_dim is unset" +
                fix);
  EXPECT_EQ(error_of(with(llama(), {{"head_dim", 5}})),
            "'" + path_ + "' describes no valid LlamaForCausalLM: head_dim 5 is odd (RoPE rotates pairs)" + fix);
  EXPECT_EQ(
      error_of(
          with(llama(),
               {{"rope_scaling",
                 {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 1.0}}}})),
      "'" + path_ + "' field 'rope_scaling.high_freq_factor' is 1.0, expected a number > low_freq_factor 4" + fix);
  EXPECT_EQ(error_of(with(llama(), {{"rope_scaling",
                                     {{"rope_type", "llama3"}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}}}})),
            "'" + path_ + "' has no field 'rope_scaling.factor', which LlamaForCausalLM needs" + fix);
}

TEST_F(HfConfigTest, UnsupportedValuesListWhatIsSupported) {
  EXPECT_EQ(error_of(with(llama(), {{"architectures", {"MistralForCausalLM"}}})),
            unsupported("architectures", "[\"MistralForCausalLM\"]",
                        "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel, MixtralForCausalLM, "
                        "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, OlmoeForCausalLM",
                        "a Hugging Face model"));
  EXPECT_EQ(error_of({{"model_type", "mistral"}}),
            unsupported("model_type", "\"mistral\"", "llama, qwen2, qwen3, gpt2, mixtral, qwen2_moe, qwen3_moe, olmoe",
                        "a Hugging Face model"));
  EXPECT_EQ(
      error_of(with(llama(), {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}})),
      unsupported("rope_scaling.rope_type", "\"yarn\"", "\"default\" and \"llama3\" (Llama 3.1)", "LlamaForCausalLM"));
  EXPECT_EQ(
      error_of(with(llama(), {{"rope_parameters", {{"type", "linear"}, {"factor", 2.0}}}})),
      unsupported("rope_parameters.type", "\"linear\"", "\"default\" and \"llama3\" (Llama 3.1)", "LlamaForCausalLM"));
  EXPECT_EQ(error_of(with(llama(), {{"partial_rotary_factor", 0.5}})),
            unsupported("partial_rotary_factor", "0.5", "1 (rotary on the whole head)", "LlamaForCausalLM"));
  EXPECT_EQ(error_of(with(llama(), {{"hidden_act", "gelu"}})),
            unsupported("hidden_act", "\"gelu\"", "\"silu\" (SwiGLU)", "LlamaForCausalLM"));
  EXPECT_EQ(error_of(with(llama(), {{"architectures", {"Qwen2ForCausalLM"}}, {"use_sliding_window", true}})),
            unsupported("use_sliding_window", "true", "false (full attention in every layer)", "Qwen2ForCausalLM"));
  EXPECT_EQ(error_of(with(llama(), {{"architectures", {"Qwen3ForCausalLM"}},
                                    {"layer_types", {"full_attention", "sliding_attention"}}})),
            unsupported("layer_types", "[\"full_attention\",\"sliding_attention\"]",
                        "[\"full_attention\", ...] in every layer", "Qwen3ForCausalLM"));
  EXPECT_EQ(error_of(with(llama(), {{"torch_dtype", "int8"}})),
            unsupported("torch_dtype", "\"int8\"", "\"float32\", \"bfloat16\", \"float16\" and \"float64\"",
                        "LlamaForCausalLM"));
  const json gpt2 = graphed::testing::gpt2_folder().config;
  EXPECT_EQ(
      error_of(with(gpt2, {{"activation_function", "relu"}})),
      unsupported("activation_function", "\"relu\"",
                  "\"gelu_new\", \"gelu_pytorch_tanh\" (tanh GELU) and \"gelu\" (exact GELU)", "GPT2LMHeadModel"));
  EXPECT_EQ(error_of(with(gpt2, {{"scale_attn_by_inverse_layer_idx", true}})),
            unsupported("scale_attn_by_inverse_layer_idx", "true", "false", "GPT2LMHeadModel"));
  EXPECT_EQ(error_of(with(gpt2, {{"add_cross_attention", true}})),
            unsupported("add_cross_attention", "true", "false (decoder only)", "GPT2LMHeadModel"));
}

}  // namespace
}  // namespace graphed::hf
