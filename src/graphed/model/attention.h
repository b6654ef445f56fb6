// model/attention.h — causal self-attention: fused QKV projection (MHA or GQA), optional per-head
// q/k norm (Qwen3), optional rotary position embedding (with Llama 3.1's frequency scaling), SDPA
// through util/compat.h, output projection. Input and output [batch, seq, hidden]. Dropout on the output and
// the residual are the layer's; forward_from_stream takes the layer's norm (so a path may fuse it with the QKV
// projection), and the decoding paths take the norm and add the residual themselves, so that their kernels fold both
// in.
#pragma once

#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "graphed/model/kernel_path.h"
#include "graphed/model/layer_cache.h"
#include "graphed/model/norm.h"
#include "graphed/model/paged_batch.h"
#include "graphed/model/tensor_parallel.h"

namespace graphed::model {

/// Llama 3.1's RoPE frequency scaling (HF rope_type "llama3", Megatron --use-rope-scaling): wavelengths
/// above original_max_positions / low_freq_factor are stretched by factor, those below
/// original_max_positions / high_freq_factor kept, the ones between interpolated smoothly.
struct RopeScaling {
  double factor = 8.0;                    ///< > 0
  double low_freq_factor = 1.0;           ///< > 0
  double high_freq_factor = 4.0;          ///< > low_freq_factor
  int64_t original_max_positions = 8192;  ///< the pretraining context, >= 1
};

struct AttentionShape {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_query_groups = 0;  ///< == num_heads for MHA
  int64_t head_dim = 0;          ///< size of a head (--kv-channels); 0 = hidden_size / num_heads
  int64_t max_sequence = 0;      ///< rotary table length: the positions project() accepts
  bool rope = false;
  double rotary_base = 10000;
  bool rope_scaling = false;  ///< scale the rotary frequencies as rope_scaling_options says
  RopeScaling rope_scaling_options;
  bool bias = true;                   ///< biases on the QKV and output projections
  bool qkv_bias = false;              ///< a bias on the QKV projection even when `bias` is off (Qwen2)
  bool qk_norm = false;               ///< norm q and k over each head, before RoPE (Qwen3): modules q_norm, k_norm
  bool qk_norm_across_heads = false;  ///< with qk_norm: over every head's q at once, and every group's k (OLMoE)
  bool rms_norm = false;              ///< the q/k norm is RMSNorm, else LayerNorm
  double norm_epsilon = 1e-5;         ///< of the q/k norm
  double attention_dropout = 0.0;
  double init_std = 0.02;
  double output_init_std = 0.02;
};

/// The rotary inverse frequencies [head_dim / 2] (float64): base^(-2i / head_dim), scaled when
/// shape.rope_scaling is on, by Hugging Face's _compute_llama3_parameters formula.
at::Tensor rope_inverse_frequencies(const AttentionShape& shape, int64_t head_dim);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionShape& shape);
  at::Tensor forward(const at::Tensor& input);  // [b, s, h] -> [b, s, h]
  /// The stream and forward(norm(hidden)) (a training step's): the norm and the QKV projection in one call to the
  /// path where nothing stands between them (one tensor-parallel rank), so the path may fuse them.
  NormedLinear forward_from_stream(const at::Tensor& hidden, const NormImpl& norm);

  /// The attention inputs of `input` [b, s, h]: q [b, heads, s, d], k and v [b, groups, s, d], with
  /// the q/k norm (when on) and then the rotary embedding applied at `positions` [b, s] (int64, each
  /// < max_sequence), or at 0..s-1 when undefined.
  struct Projection {
    at::Tensor query, key, value;
  };
  Projection project(const at::Tensor& input, const at::Tensor& positions = {}) const;
  /// Inference: the residual stream after this attention, hidden + attention(norm(hidden)), for a serving
  /// step's flat batch hidden [1, tokens, h] over a paged cache (key/value [blocks, block size, groups, head
  /// dim]): writes each token's key and value into its slot, then attends per batch.segments (dense, per
  /// prefill run) and paged attention (every other token). Grouped queries share their group's keys
  /// without copies on the paged path. Same shapes in, same kernels: a captured call replays bitwise what an
  /// eager one computes.
  at::Tensor forward_paged(const at::Tensor& hidden, const NormImpl& norm, const PagedBatch& batch,
                           const LayerCache& cache) const;
  /// Zero paged keys and values: [blocks, block_size, groups, head dim] each, in `options`.
  LayerCache allocate_paged_cache(int64_t blocks, int64_t block_size, const at::TensorOptions& options) const;
  /// The output projection of the attention context [b, heads, s, d] -> [b, s, h], plus `residual`
  /// [b, s, h] when defined (decoding: one kernel).
  at::Tensor output_projection(const at::Tensor& context, const at::Tensor& residual = {}) const;
  /// The kernels every forward runs (model/kernel_path.h), the q/k norms' included.
  void use_kernel_path(std::shared_ptr<const KernelPath> path);
  /// Keeps this rank's heads of `tensor`'s group (Megatron: QKV column-parallel by query groups, the output
  /// projection row-parallel with its bias on the first rank): every path then runs on them. Once, before
  /// training or decoding; the whole shape's heads and groups must divide by the group's size.
  void split_for_tensor_parallel(const TensorParallel& tensor);
  /// How each parameter (by its name in this module) lies over the tensor-parallel ranks.
  std::vector<std::pair<std::string, ParameterSplit>> tensor_splits() const;
  const AttentionShape& shape() const { return shape_; }
  int64_t head_dim() const { return head_dim_; }

 private:
  /// A serving step's queries [tokens, heads, d] from hidden [1, tokens, h], its keys and values written into
  /// the paged cache: the norm and QKV projection, then RoPE with the cache write (the path's, fused where it
  /// can), or with q/k norms LibTorch's projection and RoPE.
  at::Tensor paged_query(const at::Tensor& hidden, const NormImpl& norm, const PagedBatch& batch,
                         const LayerCache& cache) const;
  at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& positions) const;  // [b, heads, s, d]
  /// Dense attention of one prefill run's queries [heads, length, d] over its request's cached context.
  at::Tensor prefill_attention(const at::Tensor& query, const PrefillSegment& segment, const PagedBatch& batch,
                               const LayerCache& cache) const;
  /// The attention inputs of the QKV projection's output `qkv` [b, s, (heads + 2 groups) d] (project's second half).
  Projection split_projection(const at::Tensor& qkv, const at::Tensor& positions) const;
  /// The attention of a projection and its output projection (forward's second half).
  at::Tensor attend(Projection projection);
  /// The path's linear, or without autograd its inference form.
  at::Tensor project_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const;

  AttentionShape shape_;
  int64_t head_dim_;
  int64_t heads_, groups_;  // this rank's query heads and key/value groups (the shape's with one rank)
  TensorParallel tensor_;
  at::Tensor qkv_weight_, qkv_bias_, proj_weight_, proj_bias_;  // qkv [(heads + 2 groups) d, h], proj [h, heads d]
  Norm q_norm_{nullptr}, k_norm_{nullptr};  // over head_dim, shared by the heads; or over heads (groups) x head_dim
  std::shared_ptr<const KernelPath> path_ = aten_path();
  at::Tensor rope_cos_, rope_sin_;  // buffers [max_sequence, head_dim / 2]
};
TORCH_MODULE(Attention);

}  // namespace graphed::model
