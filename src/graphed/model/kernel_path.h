// model/kernel_path.h — which kernels the model's layers run, chosen once where the model is assembled and
// handed to every layer: LibTorch's ops (aten_path), with graphed's decode kernels for inference over them
// (model/decode_kernel_path.h; --fused-kernels, the default), or graphed's fused training kernels over working
// copies of the weights (FusedPath, model/fused_path.h, set by the trainer). Layers call their path and never
// ask which one it is: each path's inference operations decide for themselves which tensors their kernels take.
#pragma once

#include <memory>

#include <ATen/ATen.h>

#include "graphed/kernels/decode_ops.h"
#include "graphed/kernels/paged_attention_ops.h"
#include "graphed/kernels/training_ops.h"

namespace graphed::model {

/// A residual stream and the output of the linear that reads its norm (KernelPath::norm_linear).
struct NormedLinear {
  at::Tensor stream;  ///< the stream itself, to add the branch's update to (residual_norm's contract)
  at::Tensor output;  ///< linear(norm(stream))
};

/// Where a serving step's keys and values go, and how they turn (KernelPath::rope_into_paged_cache).
struct PagedCacheWrite {
  at::Tensor positions;               ///< [tokens] int64: each token's position
  at::Tensor cache_rows;              ///< [tokens] int64: block x block size + offset in the block
  at::Tensor cos, sin;                ///< [positions, head_dim / 2]; undefined: no rotary embedding
  at::Tensor key_cache, value_cache;  ///< [blocks, block size, groups, head_dim]
  int64_t heads = 0, groups = 0, head_dim = 0;
};

class KernelPath {
 public:
  virtual ~KernelPath() = default;

  /// input weight^T + bias (bias may be undefined), as training computes it.
  virtual at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const = 0;
  /// The same projection without autograd (evaluation, sampling): one-row decode kernels where they apply.
  virtual at::Tensor inference_linear(const at::Tensor& input, const at::Tensor& weight,
                                      const at::Tensor& bias) const = 0;
  /// Decoding's projection with its input transform and residual (kernels::decode_linear's contract):
  /// residual + inference_linear(first(input), weight, bias), the transform by inference_norm or SwiGLU's
  /// LibTorch form, unless the path fuses them.
  virtual at::Tensor decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                   const kernels::LinearInput& first, const at::Tensor& residual) const {
    const at::Tensor output = inference_linear(transformed(input, first), weight, bias);
    return residual.defined() ? residual + output : output;
  }
  /// Inference's norm (no autograd): norm() unless the path has a kernel for it.
  virtual at::Tensor inference_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                    double epsilon) const {
    return norm(input, weight, bias, epsilon);
  }
  /// From a serving step's QKV projection qkv [tokens, (heads + 2 groups) head_dim]: the queries [tokens,
  /// heads, head_dim], rotated at their positions (kernels::rope_into_paged_cache's contract); the keys,
  /// rotated likewise, and the values written into the paged caches. LibTorch's ops unless the path has a
  /// kernel for it.
  virtual at::Tensor rope_into_paged_cache(const at::Tensor& qkv, const PagedCacheWrite& write) const;
  /// Serving's attention over paged caches (kernels::paged_attention's contract): the LibTorch reference
  /// unless the path has a kernel for it.
  virtual at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache,
                                     const at::Tensor& value_cache, const kernels::PagedContext& context,
                                     double scale) const {
    return kernels::reference::paged_attention(query, key_cache, value_cache, context, scale);
  }

  /// LayerNorm (bias defined) or RMSNorm over the last dimension.
  virtual at::Tensor norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                          double epsilon) const = 0;
  /// The residual stream `hidden` and its norm (kernels::residual_norm's contract): a branch adds its update
  /// to the returned stream, so a path may add the stream's gradient inside the norm's backward.
  virtual kernels::NormedStream residual_norm(const at::Tensor& hidden, const at::Tensor& weight,
                                              const at::Tensor& bias, double epsilon) const {
    return {hidden, norm(hidden, weight, bias, epsilon)};
  }
  /// residual_norm(hidden, ...) and the linear that reads its norm, in one call, so a path may write the norm
  /// straight into the form the linear reads (FP8: E4M3, model/fp8_path.h; TransformerEngine's LayerNormLinear).
  /// A path that wraps another composes its own (model/wrapped_path.h does not forward this).
  virtual NormedLinear norm_linear(const at::Tensor& hidden, const at::Tensor& norm_weight, const at::Tensor& norm_bias,
                                   double epsilon, const at::Tensor& weight, const at::Tensor& bias) const {
    const kernels::NormedStream input = residual_norm(hidden, norm_weight, norm_bias, epsilon);
    return {input.stream, linear(input.normed, weight, bias)};
  }
  /// Rotary embedding at positions 0..s-1 by cos/sin.
  virtual at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const = 0;
  /// silu(first half) * second half.
  virtual at::Tensor swiglu(const at::Tensor& x) const = 0;
  /// linear(swiglu(x), weight, bias): the MLP's second linear with its activation, so a path may compute
  /// SwiGLU inside the kernel that prepares the linear's input (FP8: its cast, model/fp8_path.h). A path
  /// that wraps another composes its own swiglu and linear (model/wrapped_path.h does not forward this).
  virtual at::Tensor swiglu_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const {
    return linear(swiglu(x), weight, bias);
  }
  /// hidden + update.
  virtual at::Tensor residual_add(const at::Tensor& hidden, const at::Tensor& update) const = 0;
  /// A parameter as `type`, for a product a layer runs itself (an MoE's router and grouped experts): a cast by
  /// default; a path that keeps working copies hands out the copy, and its gradient reaches the parameter.
  virtual at::Tensor working_weight(const at::Tensor& master, at::ScalarType type) const { return master.to(type); }

  /// The output layer's logits, in fp32 (fp64 for an fp64 model).
  virtual at::Tensor logits(const at::Tensor& normed, const at::Tensor& weight) const = 0;
  /// Whether the path has the output layer and the loss in one (never holding fp32 logits).
  virtual bool fuses_output_loss() const = 0;
  /// That fused loss: mean cross entropy of normed [tokens, hidden] x weight^T against labels [tokens].
  virtual at::Tensor linear_cross_entropy(const at::Tensor& normed, const at::Tensor& weight,
                                          const at::Tensor& labels) const = 0;

  /// After each optimizer step (wherever it runs: eagerly or inside a graph): state the path keeps across
  /// steps moves on (FP8 delayed scales, model/fp8_path.h). Device work only, no host sync.
  virtual void end_step() const {}
  /// After the weights' working copies were written outside a step (a checkpoint load): state the path made
  /// from them is made again (the FP8 casts of the weights). Eager, between steps.
  virtual void weights_loaded() const {}

 protected:
  /// decode_linear's input transform, unfused: inference_norm (RMSNorm), SwiGLU in LibTorch's ops, or none.
  at::Tensor transformed(const at::Tensor& input, const kernels::LinearInput& first) const;
};

/// LibTorch's ops, for training and inference alike.
std::shared_ptr<const KernelPath> aten_path();

}  // namespace graphed::model
