// tests/hf/hf_reference_forward.h — the reference forward of a Hugging Face model, computed in float64
// straight from its tensors, written from transformers' modeling_llama.py / modeling_qwen2.py /
// modeling_qwen3.py / modeling_gpt2.py and the MoE blocks of modeling_mixtral.py / modeling_qwen2_moe.py /
// modeling_qwen3_moe.py: RMSNorm, rotate_half RoPE with llama3 scaling, GQA, SwiGLU, q/k norm, experts.
#pragma once

#include <cmath>
#include <string>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "hf_folder_for_test.h"

namespace graphed::testing {

using nlohmann::json;

inline at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return weight * (x * at::rsqrt(x.pow(2).mean(-1, true) + eps));
}

inline at::Tensor rotate_half(const at::Tensor& x) {
  const auto halves = x.chunk(2, -1);
  return at::cat({-halves[1], halves[0]}, -1);
}

/// _compute_default_rope_parameters, and _compute_llama3_parameters when rope_scaling says llama3.
inline at::Tensor reference_inverse_frequencies(const json& config, int64_t dim) {
  const double theta = config["rope_theta"].get<double>();
  at::Tensor inv = 1.0 / at::pow(theta, at::arange(0, dim, 2, at::kDouble) / static_cast<double>(dim));
  const json& scaling = config["rope_scaling"];
  if (scaling.is_null() || scaling["rope_type"] != "llama3") return inv;
  const double factor = scaling["factor"], low = scaling["low_freq_factor"], high = scaling["high_freq_factor"];
  const double old_context = scaling["original_max_position_embeddings"];
  const at::Tensor wavelength = 2 * M_PI / inv;
  at::Tensor llama = at::where(wavelength > old_context / low, inv / factor, inv);
  const at::Tensor smooth = (old_context / wavelength - low) / (high - low);
  const at::Tensor smoothed = (1 - smooth) * llama / factor + smooth * llama;
  const at::Tensor medium = (wavelength >= old_context / high).logical_and(wavelength <= old_context / low);
  return at::where(medium, smoothed, llama);
}

/// Causal attention of q [H, s, d] over k, v [G, s, d] (each k/v head serves H / G query heads).
inline at::Tensor reference_attention(const at::Tensor& q, at::Tensor k, at::Tensor v) {
  const int64_t repeat = q.size(0) / k.size(0);
  k = k.repeat_interleave(repeat, 0);
  v = v.repeat_interleave(repeat, 0);
  const int64_t s = q.size(1);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  scores = scores.masked_fill(at::ones({s, s}, at::kBool).triu(1), -INFINITY);
  return at::matmul(at::softmax(scores, -1), v).transpose(0, 1).reshape({s, -1});  // [s, H d]
}

inline at::Tensor linear(const at::Tensor& x, const HfFolder& f, const std::string& name) {
  const std::string bias = name + ".bias";
  return at::linear(x, f.at(name + ".weight"), f.tensors.count(bias) ? f.at(bias) : at::Tensor());
}

/// SwiGLU without biases: down(silu(gate x) * up x).
inline at::Tensor swiglu_reference(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up,
                                   const at::Tensor& down) {
  return at::linear(at::silu(at::linear(x, gate)) * at::linear(x, up), down);
}

/// A mixture-of-experts block on x [s, h] (modeling_mixtral.py / modeling_qwen2_moe.py / modeling_qwen3_moe.py):
/// softmax over every expert, the top k, renormalised for Mixtral or with norm_topk_prob, each token's experts
/// summed token by token; Qwen2-MoE's shared expert times sigmoid(shared_expert_gate x). Experts per expert or
/// fused (gate_up_proj [E, 2 f, h], down_proj [E, h, f]).
inline at::Tensor moe_reference(const HfFolder& f, const std::string& block, const at::Tensor& x) {
  const nlohmann::json& c = f.config;
  const bool mixtral = c["architectures"][0] == "MixtralForCausalLM";
  const bool renormalise = mixtral || c.value("norm_topk_prob", false);
  const int64_t k = c["num_experts_per_tok"];
  const at::Tensor probabilities = at::softmax(at::linear(x, f.at(block + "gate.weight")), -1);
  const auto top = probabilities.topk(k, -1);
  at::Tensor weights = std::get<0>(top);
  if (renormalise) weights = weights / weights.sum(-1, true);
  const bool fused = f.tensors.count(block + "experts.gate_up_proj") == 1;
  const auto expert = [&](const at::Tensor& row, int64_t e) {
    if (fused) {
      const auto halves = f.at(block + "experts.gate_up_proj")[e].chunk(2, 0);
      return swiglu_reference(row, halves[0], halves[1], f.at(block + "experts.down_proj")[e]);
    }
    const std::string p = block + "experts." + std::to_string(e) + ".";
    return mixtral ? swiglu_reference(row, f.at(p + "w1.weight"), f.at(p + "w3.weight"), f.at(p + "w2.weight"))
                   : swiglu_reference(row, f.at(p + "gate_proj.weight"), f.at(p + "up_proj.weight"),
                                      f.at(p + "down_proj.weight"));
  };
  at::Tensor output = at::zeros_like(x);
  for (int64_t t = 0; t < x.size(0); ++t) {
    for (int64_t j = 0; j < k; ++j) {
      output[t] += weights[t][j] * expert(x[t], std::get<1>(top)[t][j].item<int64_t>());
    }
  }
  const std::string shared = block + "shared_expert.";
  if (f.tensors.count(shared + "gate_proj.weight") == 1) {
    const at::Tensor gate = at::sigmoid(at::linear(x, f.at(block + "shared_expert_gate.weight")));
    output += gate * swiglu_reference(x, f.at(shared + "gate_proj.weight"), f.at(shared + "up_proj.weight"),
                                      f.at(shared + "down_proj.weight"));
  }
  return output;
}

/// Layer p's feed-forward part on x [s, h]: its MoE block when it has a router, else the dense SwiGLU MLP (with
/// Llama's mlp_bias biases when the folder has them).
inline at::Tensor feed_forward(const HfFolder& f, const std::string& p, const at::Tensor& x) {
  for (const char* block : {"block_sparse_moe.", "mlp."}) {
    if (f.tensors.count(p + block + "gate.weight") == 1) return moe_reference(f, p + block, x);
  }
  return linear(at::silu(linear(x, f, p + "mlp.gate_proj")) * linear(x, f, p + "mlp.up_proj"), f, p + "mlp.down_proj");
}

/// LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM and their MoE models (OLMoE's q/k norms across heads)
/// on tokens [s]: logits [s, vocab].
inline at::Tensor llama_reference(const HfFolder& f, const at::Tensor& tokens) {
  const json& c = f.config;
  const int64_t heads = c["num_attention_heads"], groups = c["num_key_value_heads"], d = c["head_dim"];
  const double eps = c["rms_norm_eps"];
  const bool qk_norm = f.tensors.count("model.layers.0.self_attn.q_norm.weight") == 1;
  const int64_t s = tokens.size(0);
  // The rotary table in float32, as transformers (LlamaRotaryEmbedding computes in float32) and graphed
  // (its rope_cos/rope_sin buffers) both keep it; the rest in float64.
  const at::Tensor angles = at::outer(at::arange(s, at::kDouble), reference_inverse_frequencies(c, d));
  const auto as_float = [](const at::Tensor& t) { return t.to(at::kFloat).to(at::kDouble); };
  const at::Tensor cos = as_float(at::cat({angles.cos(), angles.cos()}, -1));
  const at::Tensor sin = as_float(at::cat({angles.sin(), angles.sin()}, -1));
  at::Tensor x = f.at("model.embed_tokens.weight").index_select(0, tokens);
  for (int64_t i = 0; i < c["num_hidden_layers"].get<int64_t>(); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const at::Tensor a = rms_norm(x, f.at(p + "input_layernorm.weight"), eps);
    at::Tensor q = linear(a, f, p + "self_attn.q_proj");
    at::Tensor k = linear(a, f, p + "self_attn.k_proj");
    const at::Tensor v = linear(a, f, p + "self_attn.v_proj").view({s, groups, d}).transpose(0, 1);
    // q/k norms per head (Qwen3), or across every head's queries and every group's keys (OLMoE).
    const bool across = qk_norm && f.at(p + "self_attn.q_norm.weight").numel() == heads * d && heads > 1;
    if (across) {
      q = rms_norm(q, f.at(p + "self_attn.q_norm.weight"), eps);
      k = rms_norm(k, f.at(p + "self_attn.k_norm.weight"), eps);
    }
    q = q.view({s, heads, d});
    k = k.view({s, groups, d});
    if (qk_norm && !across) {
      q = rms_norm(q, f.at(p + "self_attn.q_norm.weight"), eps);
      k = rms_norm(k, f.at(p + "self_attn.k_norm.weight"), eps);
    }
    q = q.transpose(0, 1);
    k = k.transpose(0, 1);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    x = x + linear(reference_attention(q, k, v), f, p + "self_attn.o_proj");
    x = x + feed_forward(f, p, rms_norm(x, f.at(p + "post_attention_layernorm.weight"), eps));
  }
  x = rms_norm(x, f.at("model.norm.weight"), eps);
  return at::linear(x, f.tensors.count("lm_head.weight") ? f.at("lm_head.weight") : f.at("model.embed_tokens.weight"));
}

/// GPT2LMHeadModel on tokens [s]: Conv1D is x @ W + b with W [in, out].
inline at::Tensor gpt2_reference(const HfFolder& f, const at::Tensor& tokens) {
  const json& c = f.config;
  const int64_t h = c["n_embd"], heads = c["n_head"];
  const double eps = c["layer_norm_epsilon"];
  const int64_t s = tokens.size(0);
  const auto conv1d = [&](const at::Tensor& x, const std::string& name) {
    return at::addmm(f.at(name + ".bias"), x, f.at(name + ".weight"));
  };
  const auto layer_norm = [&](const at::Tensor& x, const std::string& name) {
    return at::layer_norm(x, {h}, f.at(name + ".weight"), f.at(name + ".bias"), eps);
  };
  const auto gelu_new = [](const at::Tensor& x) {
    return 0.5 * x * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * at::pow(x, 3.0))));
  };
  at::Tensor x =
      f.at("transformer.wte.weight").index_select(0, tokens) + f.at("transformer.wpe.weight").narrow(0, 0, s);
  for (int64_t i = 0; i < c["n_layer"].get<int64_t>(); ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    const auto qkv = conv1d(layer_norm(x, p + "ln_1"), p + "attn.c_attn").split(h, -1);
    const auto heads_of = [&](const at::Tensor& t) { return t.view({s, heads, h / heads}).transpose(0, 1); };
    x = x + conv1d(reference_attention(heads_of(qkv[0]), heads_of(qkv[1]), heads_of(qkv[2])), p + "attn.c_proj");
    x = x + conv1d(gelu_new(conv1d(layer_norm(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj");
  }
  return at::linear(layer_norm(x, "transformer.ln_f"), f.at("transformer.wte.weight"));
}

}  // namespace graphed::testing
