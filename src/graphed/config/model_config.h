// config/model_config.h — the GPT / MoE architecture settings, named after Megatron's flags
// (--num-layers -> num_layers). Optional fields are "unset" until resolve_run_config() derives
// them (ffn_hidden_size = 4 x hidden, num_query_groups = heads, ...). Plain aggregate, no torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace graphed::config {

/// --normalization: the layer norm of every layer and the final norm.
enum class Normalization { kLayerNorm, kRmsNorm };
/// --position-embedding-type: learned absolute positions added to the input, or rotary (RoPE).
enum class PositionEmbedding { kLearnedAbsolute, kRope };

/// The spellings, in enum order ("LayerNorm", "RMSNorm"; "learned_absolute", "rope").
const std::vector<std::string>& normalization_names();
const std::vector<std::string>& position_embedding_names();

struct ModelConfig {
  int64_t num_layers = 2;                          ///< --num-layers, >= 1
  int64_t hidden_size = 128;                       ///< --hidden-size, divisible by heads
  int64_t num_attention_heads = 2;                 ///< --num-attention-heads
  bool group_query_attention = false;              ///< --group-query-attention
  std::optional<int64_t> num_query_groups;         ///< --num-query-groups; unset = heads (MHA)
  std::optional<int64_t> kv_channels;              ///< --kv-channels: size of a head; unset = hidden / heads
  std::optional<int64_t> ffn_hidden_size;          ///< --ffn-hidden-size; unset = 4 x hidden (SwiGLU: 8/3 x, /64)
  int64_t seq_length = 64;                         ///< --seq-length, tokens per sample
  std::optional<int64_t> max_position_embeddings;  ///< --max-position-embeddings; unset = seq_length
  int64_t vocab_size = 1024;                       ///< --vocab-size
  Normalization normalization = Normalization::kLayerNorm;  ///< --normalization LayerNorm|RMSNorm
  double norm_epsilon = 1e-5;                               ///< --norm-epsilon
  bool qk_layernorm = false;  ///< --qk-layernorm: norm q and k per head, before RoPE (Qwen3)
  /// --qk-layernorm-across-heads: with --qk-layernorm, one norm over every head's queries (and one over every
  /// group's keys) instead of one per head (OLMoE); not split over tensor-parallel ranks (PL-12).
  bool qk_layernorm_across_heads = false;
  bool swiglu = false;       ///< --swiglu: SwiGLU MLP instead of GELU
  bool openai_gelu = false;  ///< --openai-gelu: tanh-approximate GELU (GPT-2's gelu_new)
  PositionEmbedding position_embedding_type = PositionEmbedding::kLearnedAbsolute;  ///< learned_absolute|rope
  double rotary_base = 10000;                                                       ///< --rotary-base (rope only)
  /// --use-rope-scaling: Llama 3.1's frequency scaling of RoPE (HF rope_type "llama3"). The last three
  /// fields have no flag (as in Megatron); the HF loader sets them from config.json.
  bool use_rope_scaling = false;
  double rope_scaling_factor = 8.0;                              ///< --rope-scaling-factor (HF factor), > 0
  double rope_scaling_low_freq_factor = 1.0;                     ///< HF low_freq_factor, > 0
  double rope_scaling_high_freq_factor = 4.0;                    ///< HF high_freq_factor, > low_freq_factor
  int64_t rope_scaling_original_max_position_embeddings = 8192;  ///< the pretraining context, >= 1
  bool add_bias_linear = true;                                   ///< --add-bias-linear / --disable-bias-linear
  bool add_qkv_bias = false;                         ///< --add-qkv-bias: bias on the QKV projection only (Qwen2)
  bool untie_embeddings_and_output_weights = false;  ///< --untie-embeddings-and-output-weights
  double attention_dropout = 0.1;                    ///< --attention-dropout, in [0, 1)
  double hidden_dropout = 0.1;                       ///< --hidden-dropout, in [0, 1)
  double init_method_std = 0.02;                     ///< --init-method-std
  bool bf16 = false;                                 ///< --bf16: bf16 autocast on the GPU
  /// --fused-kernels / --no-fused-kernels: with --bf16 on a GPU, graphed's fused CUDA kernels
  /// (kernels/training_ops.h) and bf16 working weights refreshed by the optimizer; off, LibTorch's ops
  /// under autocast (the ATen path).
  bool fused_kernels = true;

  // Mixture of experts.
  std::optional<int64_t> num_experts;                          ///< --num-experts; unset = dense model
  int64_t moe_router_topk = 2;                                 ///< --moe-router-topk, 1..num_experts
  std::optional<int64_t> moe_ffn_hidden_size;                  ///< --moe-ffn-hidden-size; unset = ffn_hidden_size
  std::optional<int64_t> moe_shared_expert_intermediate_size;  ///< shared expert width; unset = none
  bool moe_shared_expert_gate = false;  ///< --moe-shared-expert-gate: shared expert x sigmoid(x . gate) (Qwen2-MoE)
  /// --moe-router-pre-softmax: softmax over every expert, then top-k, the k probabilities kept as they are
  /// (Hugging Face's norm_topk_prob false); off: top-k of the logits, then softmax over the k (renormalised).
  bool moe_router_pre_softmax = false;
  double moe_aux_loss_coeff = 0.0;                   ///< --moe-aux-loss-coeff (load balancing)
  std::optional<double> moe_expert_capacity_factor;  ///< --moe-expert-capacity-factor; unset = dropless
  bool moe_pad_expert_input_to_capacity = false;     ///< --moe-pad-expert-input-to-capacity (static shapes)
  bool moe_grouped_gemm = false;  ///< --moe-grouped-gemm: dropless experts in one grouped GEMM (static shapes)
  /// --moe-expert-rank-capacity-factor: under expert parallelism, dropless grouped experts exchange fixed blocks
  /// of F x the even share of rows (static shapes); an iteration that overflows one runs again dropless.
  std::optional<double> moe_expert_rank_capacity_factor;
  /// --moe-paged-stash: with those blocks, the experts keep the rows their backward needs in a pool of pages sized
  /// from the balanced load (Megatron's paged stash), only the rows that carry assignments.
  bool moe_paged_stash = false;
  int64_t moe_paged_stash_page_size = 64;                 ///< --moe-paged-stash-page-size: rows a page
  double moe_paged_stash_buffer_size_factor_cuda = 1.10;  ///< the pool over the most rows alive at once (see help)
  std::string moe_token_dispatcher_type = "allgather";    ///< allgather|alltoall
  std::string moe_layer_freq = "1";                       ///< N (every N-th layer is MoE) or a 0/1 list per layer

  // Mamba-hybrid models (Megatron's --is-hybrid-model; docs/hybrid.md).
  bool is_hybrid_model = false;  ///< --is-hybrid-model: layers by the hybrid pattern
  /// --hybrid-override-pattern: one symbol per layer (M Mamba, * attention, - MLP, E MoE). Resolution
  /// fills it from the ratios when unset, so a resolved hybrid config always has it.
  std::optional<std::string> hybrid_override_pattern;
  double hybrid_attention_ratio = 0.0;     ///< --hybrid-attention-ratio: share of attention layers
  double hybrid_mlp_ratio = 0.0;           ///< --hybrid-mlp-ratio: share of MLP layers
  int64_t mamba_state_dim = 128;           ///< --mamba-state-dim: SSM state size per head
  int64_t mamba_head_dim = 64;             ///< --mamba-head-dim: channels per Mamba head
  int64_t mamba_num_groups = 8;            ///< --mamba-num-groups: groups sharing B and C
  std::optional<int64_t> mamba_num_heads;  ///< --mamba-num-heads; unset = 2 x hidden / head dim
  int64_t mamba_conv_width = 4;            ///< --mamba-conv-width: the causal convolution's taps
  int64_t mamba_chunk_size = 128;          ///< --mamba-chunk-size: positions per chunk of the scan

  // FP8 (Megatron's fp8 settings; config/fp8_rules.h, model/fp8_path.h).
  std::optional<std::string> fp8_format;              ///< --fp8-format e4m3|hybrid; unset = no FP8 (bf16)
  std::string fp8_recipe = "delayed";                 ///< --fp8-recipe delayed|tensorwise
  int64_t fp8_margin = 0;                             ///< --fp8-margin: 2^margin of headroom, >= 0
  int64_t fp8_amax_history_len = 1;                   ///< --fp8-amax-history-len, >= 1 (delayed)
  std::string fp8_amax_compute_algo = "most_recent";  ///< --fp8-amax-compute-algo most_recent|max (delayed)
  bool fp8_wgrad = true;                              ///< --no-fp8-wgrad: weight gradients in bf16
  bool first_last_layers_bf16 = false;                ///< --first-last-layers-bf16 (tensorwise only)
  int64_t num_layers_at_start_in_bf16 = 1;            ///< with it: leading layers kept in bf16
  int64_t num_layers_at_end_in_bf16 = 1;              ///< with it: trailing layers kept in bf16

  // Activation recomputation.
  std::optional<std::string> recompute_granularity;           ///< full|selective; unset = none
  std::optional<std::string> recompute_method;                ///< uniform|block (full only)
  std::optional<int64_t> recompute_num_layers;                ///< layers per recompute unit (full only)
  std::optional<std::vector<std::string>> recompute_modules;  ///< selective; unset = core_attn

  /// The size of one attention head: kv_channels, else hidden / heads (heads >= 1).
  int64_t head_dim() const { return kv_channels.value_or(hidden_size / num_attention_heads); }
  /// Whether the model has MoE layers (num_experts > 1).
  bool is_moe() const { return num_experts.value_or(0) > 1; }
  /// Whether a layer is Mamba: a hybrid model whose pattern has M at that layer.
  bool has_mamba_layers() const {
    return is_hybrid_model && hybrid_override_pattern && hybrid_override_pattern->find('M') != std::string::npos;
  }
  /// Whether FP8 training is on (--fp8-format given).
  bool fp8() const { return fp8_format.has_value(); }
  /// Whether layer n (from 1) runs FP8: FP8 is on and, with --first-last-layers-bf16, n is outside the
  /// leading and trailing bf16 layers.
  bool fp8_layer(int64_t layer_number) const {
    if (!fp8()) return false;
    if (!first_last_layers_bf16) return true;
    return layer_number > num_layers_at_start_in_bf16 && layer_number <= num_layers - num_layers_at_end_in_bf16;
  }
  /// Whether MoE layers drop and pad to a static capacity (capacity factor set and padding on).
  bool is_drop_and_pad() const { return moe_expert_capacity_factor.has_value() && moe_pad_expert_input_to_capacity; }
  /// Whether MoE layers are dropless through the grouped GEMM (--moe-grouped-gemm, not drop-and-pad).
  bool is_grouped_dropless() const { return moe_grouped_gemm && !is_drop_and_pad(); }
  /// Whether MoE layers have static shapes (capturable whole): drop-and-pad, or grouped dropless.
  bool has_static_moe_shapes() const { return is_drop_and_pad() || is_grouped_dropless(); }
};

/// Expands --moe-layer-freq into one flag per layer (true = MoE layer). Returns nullopt when the
/// text is neither a positive integer nor a list of num_layers 0/1 values ("1,0,1,0" or "[1,0,1,0]").
std::optional<std::vector<bool>> parse_moe_layer_pattern(const std::string& text, int64_t num_layers);

}  // namespace graphed::config
