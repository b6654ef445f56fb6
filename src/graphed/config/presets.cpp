// config/presets.cpp — preset values; DESIGN.md §8 is the source. GPT-2 style presets use LayerNorm,
// learned positions, a GELU MLP of 4x hidden, biases and tied embeddings; llama-1b is Llama style.
// Every preset turns dropout off (benchmarks compare losses with eager) and bf16 autocast on.
#include "graphed/config/presets.h"

namespace graphed::config {
namespace {

using nlohmann::json;

json gpt2_style(int layers, int hidden, int heads, int seq, int micro_batch, int vocab) {
  return json{{"num_layers", layers},
              {"hidden_size", hidden},
              {"num_attention_heads", heads},
              {"ffn_hidden_size", 4 * hidden},
              {"seq_length", seq},
              {"max_position_embeddings", seq},
              {"micro_batch_size", micro_batch},
              {"vocab_size", vocab},
              {"normalization", "LayerNorm"},
              {"position_embedding_type", "learned_absolute"},
              {"swiglu", false},
              {"add_bias_linear", true},
              {"untie_embeddings_and_output_weights", false},
              {"attention_dropout", 0.0},
              {"hidden_dropout", 0.0},
              {"bf16", true}};
}

json with(json base, const json& overrides) {
  base.update(overrides);
  return base;
}

/// The learning-rate schedule and the logging of a preset's run (10 evaluation batches each time).
json schedule(double lr, int warmup_iters, int train_iters, int log_interval, int eval_interval) {
  return json{{"lr", lr},
              {"lr_warmup_iters", warmup_iters},
              {"train_iters", train_iters},
              {"log_interval", log_interval},
              {"eval_interval", eval_interval},
              {"eval_iters", 10}};
}

/// The MoE layers of moe-small and hybrid-small: 8 experts of ffn 512, top-2, drop-and-pad at capacity 1.0.
json eight_experts_top_two() {
  return json{{"num_experts", 8},
              {"moe_router_topk", 2},
              {"moe_ffn_hidden_size", 512},
              {"moe_expert_capacity_factor", 1.0},
              {"moe_pad_expert_input_to_capacity", true},
              {"moe_aux_loss_coeff", 0.01}};
}

/// llama-1b's model: Llama style (RMSNorm, RoPE, SwiGLU, GQA, no biases, untied output), 16 x 2048.
json llama_style_1b() {
  return json{{"num_layers", 16},
              {"hidden_size", 2048},
              {"num_attention_heads", 32},
              {"group_query_attention", true},
              {"num_query_groups", 8},
              {"ffn_hidden_size", 8192},
              {"swiglu", true},
              {"normalization", "RMSNorm"},
              {"position_embedding_type", "rope"},
              {"add_bias_linear", false},
              {"untie_embeddings_and_output_weights", true},
              {"seq_length", 2048},
              {"max_position_embeddings", 2048},
              {"micro_batch_size", 1},
              {"vocab_size", 32000},
              {"attention_dropout", 0.0},
              {"hidden_dropout", 0.0},
              {"bf16", true}};
}

}  // namespace

const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names{"tiny",     "small",        "gpt-125m", "moe-small",
                                              "llama-1b", "hybrid-small", "moe-1b"};
  return names;
}

std::optional<json> preset_settings(const std::string& name) {
  if (name == "tiny") {
    // Long enough on a 2-core CPU (~40 s) for samples with words in them: 768k bytes seen.
    return with(gpt2_style(2, 128, 2, 64, 8, 1024), schedule(2e-3, 100, 1500, 100, 500));
  }
  if (name == "small") return with(gpt2_style(4, 256, 4, 128, 8, 1024), schedule(1e-3, 20, 200, 20, 100));
  if (name == "gpt-125m") return with(gpt2_style(12, 768, 12, 512, 8, 50304), schedule(6e-4, 50, 200, 20, 100));
  if (name == "moe-small") {
    const json dense = with(gpt2_style(4, 256, 4, 128, 8, 1024), {{"ffn_hidden_size", 512}});
    return with(with(dense, eight_experts_top_two()), schedule(1e-3, 20, 200, 20, 100));
  }
  if (name == "llama-1b") return with(llama_style_1b(), schedule(3e-4, 50, 200, 10, 100));
  if (name == "moe-1b") {
    // llama-1b's shape with every MLP an MoE of 8 experts top-2 (Mixtral's routing), each expert a quarter of
    // llama-1b's 8192: 1.9B parameters, 0.7B active a token. Dropless through the grouped GEMM.
    const json experts{{"num_experts", 8},
                       {"moe_router_topk", 2},
                       {"moe_ffn_hidden_size", 2048},
                       {"moe_grouped_gemm", true},
                       {"moe_aux_loss_coeff", 0.01}};
    return with(with(llama_style_1b(), experts), schedule(3e-4, 50, 200, 10, 100));
  }
  if (name == "hybrid-small") {
    const json mamba{{"is_hybrid_model", true},
                     {"hybrid_override_pattern", "M*M-M*ME"},
                     {"mamba_state_dim", 64},
                     {"mamba_head_dim", 32},
                     {"mamba_num_groups", 2}};
    const json hybrid = with(with(gpt2_style(8, 256, 4, 128, 8, 1024), mamba), eight_experts_top_two());
    return with(hybrid, schedule(1e-3, 20, 200, 20, 100));
  }
  return std::nullopt;
}

std::string preset_summary(const std::string& name) {
  if (name == "tiny") return "GPT-2 style, 2 layers, hidden 128, 2 heads, seq 64, micro batch 8, vocab 1024";
  if (name == "small") return "GPT-2 style, 4 layers, hidden 256, 4 heads, seq 128, micro batch 8, vocab 1024";
  if (name == "gpt-125m") return "GPT-2 style, 12 layers, hidden 768, 12 heads, seq 512, micro batch 8, vocab 50304";
  if (name == "moe-small")
    return "small with an MoE MLP: 8 experts top-2, expert ffn 512, drop-and-pad at capacity 1.0";
  if (name == "llama-1b")
    return "Llama style, 16 layers, hidden 2048, 32 heads / 8 groups, SwiGLU 8192, RMSNorm, RoPE, seq 2048";
  if (name == "moe-1b")
    return "llama-1b with every MLP an MoE: 8 experts top-2, expert ffn 2048, dropless (grouped GEMM); 1.9B "
           "parameters, 0.7B active";
  if (name == "hybrid-small")
    return "small's sizes as a Mamba-hybrid: 8 layers M*M-M*ME (4 Mamba, 2 attention, 1 MLP, 1 MoE of 8 experts)";
  return "";
}

std::optional<std::string> fit_preset_warmup(Settings& settings, SettingOrigins& origins) {
  const auto origin = origins.find("lr_warmup_iters");
  if (origin == origins.end() || origin->second.rfind("preset ", 0) != 0) return std::nullopt;
  TrainConfig& train = settings.train;
  const int64_t decay = train.lr_decay_iters.value_or(train.train_iters);
  if (train.lr_warmup_iters <= decay || decay < 1) return std::nullopt;
  const int64_t fitted = decay / 10;
  const std::string note = origin->second + "'s --lr-warmup-iters " + std::to_string(train.lr_warmup_iters) +
                           " does not fit " + (train.lr_decay_iters ? "--lr-decay-iters " : "--train-iters ") +
                           std::to_string(decay) + ": warming up for " + std::to_string(fitted) +
                           " iterations instead (a tenth of the run; pass --lr-warmup-iters to choose)";
  train.lr_warmup_iters = fitted;
  origin->second += ", fitted to the run";
  return note;
}

}  // namespace graphed::config
