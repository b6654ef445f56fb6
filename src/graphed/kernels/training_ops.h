// kernels/training_ops.h — the fused training operations on ATen tensors: the kernels of
// kernels/training_kernels.h wrapped as autograd functions, with their shape checks, and the same
// operations in plain ATen (the reference the kernels are tested against). A CUDA build runs the kernels
// on CUDA tensors of the shapes they take and the ATen reference elsewhere; a CPU build always runs the
// reference. The model calls these only on its fused path (model/fused_path.h).
#pragma once

#include <optional>

#include <ATen/ATen.h>

namespace graphed::kernels {

/// Whether the fused training kernels run for tensors like `like` (a CUDA build and a CUDA tensor).
bool training_kernels_supported(const at::Tensor& like);

/// LayerNorm (bias defined) or RMSNorm (bias undefined) of input [..., h] (fp32 or bf16) with fp32 weight
/// and bias, computed in fp32 and returned as `output_type` (bf16: what the next linear reads).
/// accumulate_in_place: the backward adds the weight's and bias's gradients straight into their fp32
/// .grad (where they have one) and hands autograd none: the same bits as autograd's accumulation, one
/// kernel fewer per parameter; AccumulateGrad gets no gradient for them, so kernels/accumulation_listeners.h
/// hears of each. Only where nothing runs the backward to inspect the gradients (a per-layer graph's warmup).
at::Tensor norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, double epsilon,
                at::ScalarType output_type, bool accumulate_in_place = false);

/// A residual stream and its norm, from residual_norm.
struct NormedStream {
  at::Tensor stream;  ///< the stream itself, to add the branch's update to
  at::Tensor normed;  ///< norm(stream), the branch's input
};

/// norm(hidden, ...) with the stream handed on: {hidden, norm(hidden)}. A residual branch that adds its
/// update to `stream` (not to `hidden`) lets the norm's backward add the stream's gradient to its own input
/// gradient in its kernel, where autograd would sum the two branches' gradients in an add kernel of its
/// own. The same bits either way. The returned stream is a view autograd made of `hidden` inside a custom
/// function: an in-place operation on it throws (add to it out of place), and it requires grad like the norm.
NormedStream residual_norm(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias, double epsilon,
                           at::ScalarType output_type, bool accumulate_in_place = false);

/// input · weight_copyᵀ + bias_copy, where the copies are the bf16 working weights of the fp32 masters
/// weight and bias (may be undefined). The backward gives the masters fp32 gradients straight from the
/// GEMM (no bf16 gradient, no cast). accumulate_in_place: the weight's gradient GEMM adds into its fp32
/// .grad itself (beta = 1: Megatron's gradient-accumulation fusion), with no gradient tensor and no
/// AccumulateGrad add, where .grad is defined, fp32 and contiguous (the listeners hear of it). Without copies:
/// at::linear(input, weight, bias).
at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_copy,
                  const at::Tensor& bias, const at::Tensor& bias_copy, bool accumulate_in_place = false);

/// Rotary embedding of x [batch, heads, seq, head_dim] (any strides, head_dim contiguous) at positions
/// 0..seq-1; cos, sin fp32 [>= seq, head_dim / 2]. Rotates the two halves of each head.
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

/// silu(x[..., :w]) * x[..., w:] for x [..., 2w].
at::Tensor swiglu(const at::Tensor& x);

/// hidden + update: the residual connection (an fp32 stream plus a bf16 update in one kernel).
at::Tensor residual_add(const at::Tensor& hidden, const at::Tensor& update);

/// The mean cross-entropy (fp32 scalar) of logits hidden · weight_copyᵀ [rows, vocab] against labels
/// [rows]: the output layer and the loss in one, never holding fp32 logits. The bf16 logits are made
/// chunk_bytes at a time; each chunk's gradient is taken at once, so only the gradients of hidden and of
/// the master weight are kept for the backward. accumulate_in_place: the backward adds the weight's gradient
/// times the incoming one into its fp32 .grad in one kernel (the listeners hear of it). Without a copy: the
/// ATen reference over weight.
at::Tensor linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& weight_copy,
                                const at::Tensor& labels, bool accumulate_in_place = false,
                                int64_t chunk_bytes = int64_t{512} << 20);

/// Hyperparameters of adamw_step.
struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

/// One AdamW step over flat fp32 buffers (parameters, gradients, moments of one length); step (a
/// device scalar) counts this step already, learning_rate is a device scalar, grad_scale divides every
/// gradient first. working_copy (bf16, may be undefined) gets the new parameters. One kernel on a CUDA
/// build; the ATen reference elsewhere.
void adamw_step(const at::Tensor& parameters, const at::Tensor& gradients, const at::Tensor& exp_avg,
                const at::Tensor& exp_avg_sq, const at::Tensor& working_copy, const at::Tensor& learning_rate,
                const at::Tensor& step, const std::optional<at::Tensor>& grad_scale, const AdamWSettings& settings);

namespace reference {

/// The ATen forms of the operations above, with the same contracts; autograd does their backward.
at::Tensor norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, double epsilon,
                at::ScalarType output_type);
at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
/// RoPE's rotation of x's two halves by cos and sin already shaped and typed to broadcast over a half.
at::Tensor rotate_halves(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
at::Tensor swiglu(const at::Tensor& x);
at::Tensor residual_add(const at::Tensor& hidden, const at::Tensor& update);
at::Tensor linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels);
void adamw_step(const at::Tensor& parameters, const at::Tensor& gradients, const at::Tensor& exp_avg,
                const at::Tensor& exp_avg_sq, const at::Tensor& working_copy, const at::Tensor& learning_rate,
                const at::Tensor& step, const std::optional<at::Tensor>& grad_scale, const AdamWSettings& settings);

}  // namespace reference
}  // namespace graphed::kernels
