// model/attention.h — causal self-attention: fused QKV projection (MHA or GQA), optional rotary
// position embedding, SDPA through util/compat.h, output projection. Input and output [batch, seq,
// hidden]. No norm, dropout on the output or residual: the layer's attention unit adds those.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace graphed::model {

/// One layer's key/value cache: key and value [batch, groups, max sequence, head dim], in the model's
/// dtype. Positions not yet written hold anything finite: attention masks them.
struct LayerCache {
  at::Tensor key, value;
};

struct AttentionShape {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_query_groups = 0;  ///< == num_heads for MHA
  int64_t max_sequence = 0;      ///< rotary table length
  bool rope = false;
  double rotary_base = 10000;
  bool bias = true;
  double attention_dropout = 0.0;
  double init_std = 0.02;
  double output_init_std = 0.02;
};

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionShape& shape);
  at::Tensor forward(const at::Tensor& input);  // [b, s, h] -> [b, s, h]

  /// The attention inputs of `input` [b, s, h]: q [b, heads, s, d], k and v [b, groups, s, d], with
  /// the rotary embedding applied at `positions` [b, s] (int64), or at 0..s-1 when undefined.
  struct Projection {
    at::Tensor query, key, value;
  };
  Projection project(const at::Tensor& input, const at::Tensor& positions = {}) const;
  /// Attention of `input` [b, s, h] at `positions` [b, s] over the cache: writes this input's keys and
  /// values into `cache` at those positions, then attends to every cache slot not `blocked`
  /// ([b, 1, s, max sequence] bool, true = masked). Grouped queries share their group's keys without
  /// copies. Same shapes in, same kernels: a captured call replays bitwise what an eager one computes.
  at::Tensor forward_cached(const at::Tensor& input, const at::Tensor& positions, const at::Tensor& blocked,
                            const LayerCache& cache) const;
  /// The output projection of the attention context [b, heads, s, d] -> [b, s, h].
  at::Tensor output_projection(const at::Tensor& context) const;
  const AttentionShape& shape() const { return shape_; }
  int64_t head_dim() const { return head_dim_; }

 private:
  at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& positions) const;  // [b, heads, s, d]

  AttentionShape shape_;
  int64_t head_dim_;
  at::Tensor qkv_weight_, qkv_bias_, proj_weight_, proj_bias_;
  at::Tensor rope_cos_, rope_sin_;  // buffers [max_sequence, head_dim / 2]
};
TORCH_MODULE(Attention);

}  // namespace graphed::model
