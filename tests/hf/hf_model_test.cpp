// tests/hf/hf_model_test.cpp — loading Hugging Face folders written here: graphed's logits equal a
// reference forward computed in float64 straight from the Hugging Face tensors, written from
// transformers' modeling_llama.py / modeling_qwen2.py / modeling_qwen3.py / modeling_gpt2.py (RMSNorm,
// rotate_half RoPE with llama3 scaling, GQA, SwiGLU, q/k norm; GPT-2's LayerNorm, Conv1D, gelu_new);
// single and sharded files, dtypes, special tokens, and every error with its exact message.
#include "graphed/hf/hf_model.h"

#include <cmath>

#include <gtest/gtest.h>

#include "error_text.h"
#include "hf_folder_for_test.h"
#include "hf_reference_forward.h"

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::hf {
namespace {

using graphed::testing::error_text;
using graphed::testing::gpt2_reference;
using graphed::testing::HfFolder;
using graphed::testing::llama_reference;
using graphed::testing::LlamaSpec;
using nlohmann::json;

// ---- fixture ------------------------------------------------------------------------------------

class HfModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = make_temporary_directory("hf_model_test");
    ASSERT_FALSE(root_.empty());
    at::manual_seed(31);
  }
  void TearDown() override { remove_all(root_); }

  std::string dir(const std::string& name) const { return join_path(root_, name); }

  /// Loads in float64 and compares the logits of a fixed prompt with the reference computed from the
  /// weights as stored (`stored` dtype).
  void expect_matches_reference(const std::string& folder, HfFolder hf, bool gpt2, at::ScalarType stored = at::kFloat) {
    for (auto& item : hf.tensors) item.second = item.second.to(stored).to(at::kDouble);
    HfModel loaded = load_hf_model(folder, at::kCPU, at::kDouble);
    const at::Tensor tokens =
        at::tensor({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8}, at::kLong) % hf.config["vocab_size"].get<int64_t>();
    const at::Tensor expected = gpt2 ? gpt2_reference(hf, tokens) : llama_reference(hf, tokens);
    const at::Tensor logits = loaded.model->logits(tokens.view({1, -1})).squeeze(0);
    ASSERT_EQ(logits.sizes(), expected.sizes());
    EXPECT_EQ(logits.scalar_type(), at::kDouble);
    const double difference = (logits - expected).abs().max().item<double>();
    EXPECT_LT(difference, 1e-10 * (1.0 + expected.abs().max().item<double>())) << folder;
  }

  std::string root_;
};

// ---- the mapping, checked numerically -----------------------------------------------------------

TEST_F(HfModelTest, LlamaWithGqaAndLlama3RopeScalingMatchesTheReference) {
  LlamaSpec spec;
  spec.theta = 500000.0;
  spec.rope_scaling = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8}};
  spec.head_dim = 8;
  spec.hidden = 32;
  const HfFolder hf = graphed::testing::llama_folder(spec);
  graphed::testing::write_folder(dir("llama"), hf);
  expect_matches_reference(dir("llama"), hf, false);

  const HfModel loaded = load_hf_model(dir("llama"), at::kCPU);
  EXPECT_EQ(loaded.architecture, "LlamaForCausalLM");
  EXPECT_EQ(loaded.dtype, at::kFloat) << "config.json's torch_dtype";
  EXPECT_TRUE(loaded.config.use_rope_scaling);
  EXPECT_EQ(loaded.config.rope_scaling_original_max_position_embeddings, 8);
  EXPECT_EQ(loaded.config.num_query_groups, 2);
  EXPECT_TRUE(loaded.config.untie_embeddings_and_output_weights);
  EXPECT_FALSE(loaded.model->is_training());
  for (const auto& parameter : loaded.model->parameters()) {
    EXPECT_EQ(parameter.scalar_type(), at::kFloat);
    EXPECT_FALSE(parameter.requires_grad());
  }
}

TEST_F(HfModelTest, LlamaBiasesAreMappedAndTheMissingOnesZeroed) {
  for (const auto& [attention, mlp] : {std::pair<bool, bool>{true, false}, {false, true}, {true, true}}) {
    LlamaSpec spec;
    spec.attention_bias = attention;
    spec.mlp_bias = mlp;
    const HfFolder hf = graphed::testing::llama_folder(spec);
    const std::string folder = dir(std::string("bias") + (attention ? "a" : "") + (mlp ? "m" : ""));
    graphed::testing::write_folder(folder, hf);
    expect_matches_reference(folder, hf, false);
  }
}

TEST_F(HfModelTest, ShardedQwen2WithQkvBiasesAndTiedEmbeddingsMatchesTheReference) {
  LlamaSpec spec;
  spec.architecture = "Qwen2ForCausalLM";
  spec.tie = true;
  spec.heads = 4;
  spec.kv_heads = 1;
  const HfFolder hf = graphed::testing::llama_folder(spec);
  ASSERT_EQ(hf.tensors.count("lm_head.weight"), 0u);
  graphed::testing::write_folder(dir("qwen2"), hf, at::kFloat, /*shards=*/3);
  ASSERT_TRUE(path_exists(join_path(dir("qwen2"), "model-00003-of-00003.safetensors")));
  expect_matches_reference(dir("qwen2"), hf, false);
  const HfModel loaded = load_hf_model(dir("qwen2"), at::kCPU);
  EXPECT_FALSE(loaded.config.add_bias_linear);
  EXPECT_TRUE(loaded.config.add_qkv_bias);
  EXPECT_FALSE(loaded.config.untie_embeddings_and_output_weights);
}

TEST_F(HfModelTest, Qwen3WithQkNormAndItsOwnHeadSizeMatchesTheReference) {
  LlamaSpec spec;
  spec.architecture = "Qwen3ForCausalLM";
  spec.hidden = 16;
  spec.heads = 4;
  spec.head_dim = 8;  // 4 x 8 = 32 != 16, as Qwen3-0.6B's 16 x 128 != 1024
  HfFolder hf = graphed::testing::llama_folder(spec);
  // transformers 5 spelling: rope_theta inside rope_parameters, dtype instead of torch_dtype.
  hf.config.erase("rope_theta");
  hf.config.erase("rope_scaling");
  hf.config.erase("torch_dtype");
  hf.config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  hf.config["dtype"] = "bfloat16";
  graphed::testing::write_folder(dir("qwen3"), hf, at::kBFloat16);
  HfFolder reference = hf;  // the weights as stored: rounded to bf16
  for (auto& [name, tensor] : reference.tensors) tensor = tensor.to(at::kBFloat16).to(at::kDouble);
  reference.config["rope_theta"] = 1000000.0;
  reference.config["rope_scaling"] = nullptr;
  expect_matches_reference(dir("qwen3"), reference, false);

  HfModel loaded = load_hf_model(dir("qwen3"), at::kCPU);
  EXPECT_EQ(loaded.dtype, at::kBFloat16) << "config.json's dtype";
  EXPECT_EQ(loaded.model->named_parameters()["word_embeddings"].scalar_type(), at::kBFloat16);
  EXPECT_EQ(loaded.config.kv_channels, std::optional<int64_t>(8));
  EXPECT_TRUE(loaded.config.qk_layernorm);
  EXPECT_EQ(loaded.config.rotary_base, 1000000.0);
  // bf16 weights and compute against the float64 reference: bf16 rounding of activations.
  const at::Tensor tokens = at::tensor({3, 1, 4, 1, 5, 9}, at::kLong);
  const at::Tensor difference =
      loaded.model->logits(tokens.view({1, -1})).squeeze(0) - llama_reference(reference, tokens);
  EXPECT_LT(difference.abs().max().item<double>(), 0.1);
}

TEST_F(HfModelTest, Gpt2MatchesTheReferenceWithOrWithoutTheTransformerPrefix) {
  const HfFolder hf = graphed::testing::gpt2_folder();
  graphed::testing::write_folder(dir("gpt2"), hf);
  expect_matches_reference(dir("gpt2"), hf, true);

  // The hub's openai-community/gpt2 files: no "transformer." prefix, the attention-mask buffers kept.
  HfFolder hub;
  hub.config = hf.config;
  for (const auto& [name, tensor] : hf.tensors) hub.tensors[name.substr(std::string("transformer.").size())] = tensor;
  hub.tensors["h.0.attn.bias"] = at::ones({1, 1, 32, 32}, at::kDouble).tril();
  hub.tensors["h.1.attn.masked_bias"] = at::full({}, -1e4, at::kDouble);
  graphed::testing::write_folder(dir("gpt2hub"), hub);
  expect_matches_reference(dir("gpt2hub"), hf, true);

  const HfModel loaded = load_hf_model(dir("gpt2"), at::kCPU);
  EXPECT_TRUE(loaded.config.openai_gelu);
  EXPECT_EQ(loaded.config.max_position_embeddings, std::optional<int64_t>(32));
  EXPECT_EQ(loaded.eos_token_ids, std::vector<int64_t>{0});
}

TEST_F(HfModelTest, DtypeFollowsTheCallerThenConfigThenWeights) {
  HfFolder hf = graphed::testing::gpt2_folder();
  graphed::testing::write_folder(dir("half"), hf, at::kHalf);
  EXPECT_EQ(load_hf_model(dir("half"), at::kCPU).dtype, at::kHalf) << "no dtype in config.json: the weights'";
  EXPECT_EQ(load_hf_model(dir("half"), at::kCPU, at::kFloat).dtype, at::kFloat);
  hf.config["torch_dtype"] = "bfloat16";
  graphed::testing::write_folder(dir("half"), hf, at::kHalf);
  const HfModel loaded = load_hf_model(dir("half"), at::kCPU);
  EXPECT_EQ(loaded.dtype, at::kBFloat16);
  EXPECT_EQ(loaded.model->parameters().front().scalar_type(), at::kBFloat16);
  EXPECT_EQ(error_text<DataError>([&] { load_hf_model(dir("half"), at::kCPU, at::kLong); }),
            "cannot load '" + dir("half") +
                "' in dtype Long: a model's parameters need a floating-point dtype; fix: "
                "pass float32, bfloat16 or float16");
}

TEST_F(HfModelTest, SpecialTokensComeFromGenerationConfigFirst) {
  const HfFolder hf = graphed::testing::gpt2_folder();
  graphed::testing::write_folder(dir("tokens"), hf);
  graphed::testing::write_text(join_path(dir("tokens"), "generation_config.json"),
                               R"({"bos_token_id": 7, "eos_token_id": [11, 12], "do_sample": true})");
  const HfModel loaded = load_hf_model(dir("tokens"), at::kCPU);
  EXPECT_EQ(loaded.eos_token_ids, (std::vector<int64_t>{11, 12}));
  EXPECT_EQ(loaded.bos_token_id, std::optional<int64_t>(7));
  graphed::testing::write_text(join_path(dir("tokens"), "generation_config.json"), R"({"eos_token_id": null})");
  EXPECT_EQ(load_hf_model(dir("tokens"), at::kCPU).eos_token_ids, std::vector<int64_t>{0}) << "config.json's";
}

TEST_F(HfModelTest, LoadingLeavesTheGlobalRandomStateAlone) {
  graphed::testing::write_folder(dir("rng"), graphed::testing::gpt2_folder());
  at::manual_seed(5);
  const at::Tensor expected = at::randn({4});
  at::manual_seed(5);
  load_hf_model(dir("rng"), at::kCPU);
  EXPECT_TRUE(at::equal(at::randn({4}), expected));
}

// ---- errors about files and tensors -------------------------------------------------------------

TEST_F(HfModelTest, MissingWeightFilesAreNamed) {
  const std::string folder = dir("noweights");
  create_directories(folder);
  graphed::testing::write_text(join_path(folder, "config.json"), graphed::testing::gpt2_folder().config.dump());
  const std::string fix =
      "; fix: write the model with save_pretrained(folder) (safetensors is its default), or "
      "download its safetensors files";
  EXPECT_EQ(error_text<DataError>([&] { load_hf_model(folder, at::kCPU); }),
            "model folder '" + folder + "' has neither model.safetensors nor model.safetensors.index.json" + fix);
  graphed::testing::write_text(join_path(folder, "pytorch_model.bin"), "pickle");
  EXPECT_EQ(error_text<DataError>([&] { load_hf_model(folder, at::kCPU); }),
            "model folder '" + folder +
                "' has neither model.safetensors nor model.safetensors.index.json (only "
                "pytorch_model.bin, which graphed does not read)" +
                fix);
}

TEST_F(HfModelTest, ShardProblemsAreNamed) {
  const std::string folder = dir("shards");
  graphed::testing::write_folder(folder, graphed::testing::gpt2_folder(), at::kFloat, 2);
  const std::string index = join_path(folder, "model.safetensors.index.json");
  const std::string second = join_path(folder, "model-00002-of-00002.safetensors");
  ASSERT_EQ(std::rename(second.c_str(), (second + ".part").c_str()), 0);
  EXPECT_EQ(error_text<DataError>([&] { load_hf_model(folder, at::kCPU); }),
            "'" + index + "' names shard 'model-00002-of-00002.safetensors', which is missing from '" + folder +
                "'; fix: download every file of the model folder");
  ASSERT_EQ(std::rename((second + ".part").c_str(), second.c_str()), 0);

  // The index lists a tensor in a shard that lacks it.
  std::string text;
  read_file(index, text);
  json edited = json::parse(text);
  edited["weight_map"]["transformer.ln_f.bias"] =
      edited["weight_map"]["transformer.ln_f.bias"] == "model-00001-of-00002.safetensors"
          ? "model-00002-of-00002.safetensors"
          : "model-00001-of-00002.safetensors";
  const std::string claimed = join_path(folder, edited["weight_map"]["transformer.ln_f.bias"].get<std::string>());
  graphed::testing::write_text(index, edited.dump());
  const std::string message = error_text<DataError>([&] { load_hf_model(folder, at::kCPU); });
  EXPECT_TRUE(message == "'" + index + "' lists tensor 'transformer.ln_f.bias' in '" + claimed +
                             "', which does not "
                             "hold it; fix: download the model folder again or write it with save_pretrained" ||
              message.find("' holds tensor 'transformer.ln_f.bias', which '" + index +
                           "' does not list for it; fix: "
                           "download the model folder again or write it with save_pretrained") != std::string::npos)
      << message;

  graphed::testing::write_text(index, R"({"metadata": {}})");
  EXPECT_EQ(error_text<DataError>([&] { load_hf_model(folder, at::kCPU); }),
            "'" + index +
                "' has no object 'weight_map' (tensor name -> shard file); fix: download the model folder "
                "again or write it with save_pretrained");
}

TEST_F(HfModelTest, MissingUnexpectedAndMisshapenTensorsAreNamed) {
  const std::string folder = dir("tensors");
  const std::string file = join_path(folder, "model.safetensors");
  const std::string fix =
      "; fix: check that config.json belongs to these weights (download the model folder again, "
      "or write it with save_pretrained)";
  HfFolder hf = graphed::testing::llama_folder(LlamaSpec{});
  hf.tensors.erase("model.layers.1.self_attn.k_proj.weight");
  hf.tensors.erase("lm_head.weight");
  graphed::testing::write_folder(folder, hf);
  EXPECT_EQ(error_text<DataError>([&] { load_hf_model(folder, at::kCPU); }),
            "'" + file +
                "' lacks 2 tensors that LlamaForCausalLM with this config.json has: "
                "'model.layers.1.self_attn.k_proj.weight', 'lm_head.weight'" +
                fix);

  hf = graphed::testing::llama_folder(LlamaSpec{});
  hf.tensors["model.layers.0.self_attn.q_norm.weight"] = at::ones({4}, at::kDouble);
  hf.tensors["model.rotary_emb.inv_freq"] = at::ones({2}, at::kDouble);  // a buffer: ignored
  graphed::testing::write_folder(folder, hf);
  EXPECT_EQ(error_text<DataError>([&] { load_hf_model(folder, at::kCPU); }),
            "'" + file +
                "' has 1 tensor that LlamaForCausalLM with this config.json does not: "
                "'model.layers.0.self_attn.q_norm.weight'" +
                fix);

  hf = graphed::testing::llama_folder(LlamaSpec{});
  hf.tensors["model.layers.0.mlp.up_proj.weight"] = at::ones({20, 16}, at::kDouble);
  graphed::testing::write_folder(folder, hf);
  EXPECT_EQ(error_text<DataError>([&] { load_hf_model(folder, at::kCPU); }),
            "tensor 'model.layers.0.mlp.up_proj.weight' in '" + file +
                "' has shape [20, 16], but config.json "
                "implies [24, 16]" +
                fix);

  hf = graphed::testing::llama_folder(LlamaSpec{});
  graphed::testing::write_folder(folder, hf);
  auto tensors = read_safetensors(file);
  tensors["model.norm.weight"] = at::ones({16}, at::kLong);
  write_safetensors(file, {tensors.begin(), tensors.end()});
  EXPECT_EQ(error_text<DataError>([&] { load_hf_model(folder, at::kCPU); }),
            "tensor 'model.norm.weight' in '" + file +
                "' has dtype I64, expected a floating-point one (F32, BF16, "
                "F16)" +
                fix);
}

TEST_F(HfModelTest, DamagedSafetensorsSayWhatToDo) {
  const std::string folder = dir("damaged");
  graphed::testing::write_folder(folder, graphed::testing::gpt2_folder());
  const std::string file = join_path(folder, "model.safetensors");
  graphed::testing::write_text(file, "xy");
  EXPECT_EQ(error_text<DataError>([&] { load_hf_model(folder, at::kCPU); }),
            "model weights file '" + file +
                "' is corrupt: shorter than its 8-byte header length; fix: the model "
                "folder's safetensors files are damaged; download them again or write them with save_pretrained");
}

}  // namespace
}  // namespace graphed::hf
