// kernels/training_kernels.h — fused CUDA kernels for training steps, free of ATen: pointers, sizes and
// a stream, as llm.c writes them, so they compile wherever nvcc exists (CI's CPU machine included). Each
// does in one or two launches what LibTorch does in several: LayerNorm / RMSNorm forward and backward,
// RoPE, SwiGLU, cross-entropy with its gradient, and AdamW over flat buffers that also writes the bf16
// working copy of the weights. fp32 arithmetic, one rounding per output; reductions in a fixed order, so
// a kernel gives the same bits from run to run. `stream` is a cudaStream_t; a launch that fails throws
// graphed::Error (kernels/detail/launch_check.h). The ATen-facing functions (autograd, checks, the ATen
// reference) are kernels/training_ops.h.
#pragma once

#include <cstdint>

namespace graphed::kernels {

/// The element type of a tensor a kernel reads or writes where more than one is allowed.
enum class Element { kFloat32, kBFloat16 };

/// output[r] = (input[r] - mean_r) * rstd_r * weight + bias (LayerNorm; mean and bias null: RMSNorm,
/// input[r] * rstd_r * weight) for rows of `columns` values of `input_type`; output bf16; weight and
/// bias fp32. Writes mean_r (LayerNorm) and rstd_r (fp32, per row) for the backward.
void launch_norm_forward(const void* input, Element input_type, const float* weight, const float* bias, void* output,
                         float* mean, float* rstd, int64_t rows, int64_t columns, float epsilon, void* stream);

/// Whether rows of `columns` fit launch_norm_backward, whose per-warp sums live in shared memory
/// (100 KiB: up to 3,200 columns with a bias, 6,400 without).
bool norm_backward_fits(int64_t columns, bool with_bias);

/// The rows the backward's weight (and bias) partial sums have: [norm_partial_rows(rows), columns],
/// summed over their first dimension afterwards.
int64_t norm_partial_rows(int64_t rows);

/// From grad_output (bf16) and the forward's input, mean (null: RMSNorm) and rstd: grad_input (of the
/// input's type) and per-block partial sums of the weight's gradient (and of the bias's, where
/// bias_partials is not null), fp32 [norm_partial_rows(rows), columns]. Where residual_gradient (the
/// input's type and shape) is not null it is added to grad_input, with the bits of a separate add.
void launch_norm_backward(const void* grad_output, const void* input, Element input_type, const float* weight,
                          const float* mean, const float* rstd, const void* residual_gradient, void* grad_input,
                          float* weight_partials, float* bias_partials, int64_t rows, int64_t columns, void* stream);

/// output[c] = sum over p of partials[p, c] (fp32 [partial_rows, columns]), in a fixed order: the weight
/// and bias gradients from launch_norm_backward's partial sums; the second pair (may be null) in the same
/// launch. accumulate: output[c] += the sum (a parameter's gradient, in place).
void launch_column_sums(const float* partials, float* output, const float* second_partials, float* second_output,
                        int64_t partial_rows, int64_t columns, bool accumulate, void* stream);

/// Where a [batch, sequence, heads, head_dim] bf16 tensor's elements are: element (b, s, h, i) is at
/// b * batch + s * sequence + h * head (elements; head_dim is contiguous).
struct HeadStrides {
  int64_t batch, sequence, head;
};

/// Rotary embedding of the two halves of each head (GPT-NeoX / Llama): position s rotates pair
/// (i, i + head_dim / 2) by the angle whose cos/sin are cos[s, i], sin[s, i] (fp32 [positions, head_dim / 2]).
/// inverse = true rotates back (the backward). bf16 in and out, any strides.
void launch_rope(const void* input, HeadStrides input_strides, void* output, HeadStrides output_strides,
                 const float* cos, const float* sin, int64_t batch, int64_t sequence, int64_t heads, int64_t head_dim,
                 bool inverse, void* stream);

/// output [rows, width] = silu(input[:, :width]) * input[:, width:] for input [rows, 2 width], bf16.
void launch_swiglu_forward(const void* input, void* output, int64_t rows, int64_t width, void* stream);
/// grad_input [rows, 2 width] of launch_swiglu_forward from grad_output [rows, width], bf16.
void launch_swiglu_backward(const void* grad_output, const void* input, void* grad_input, int64_t rows, int64_t width,
                            void* stream);

/// output [n] (fp32) = hidden [n] (fp32) + update [n] (bf16): the residual connection of an fp32
/// residual stream, four values per load where the buffers allow.
void launch_residual_add(const float* hidden, const void* update, float* output, int64_t n, void* stream);

/// Cross-entropy of bf16 logits [rows, vocab] against labels [rows] (int64): losses[r] (fp32) =
/// logsumexp(logits[r]) - logits[r, labels[r]], and logits[r] is overwritten with its gradient,
/// (softmax(logits[r]) - onehot(labels[r])) * grad_scale, in bf16. A label outside [0, vocab) gives a
/// NaN loss.
void launch_cross_entropy(void* logits, const int64_t* labels, float* losses, int64_t rows, int64_t vocab,
                          float grad_scale, void* stream);

/// One AdamW step over n fp32 elements of flat buffers (PyTorch's AdamW with decoupled weight decay):
/// the gradient divided by *grad_scale (null: 1), moments updated, bias corrections from *step (already
/// counting this step), learning rate *learning_rate; bf16_copy (may be null) gets each new parameter
/// rounded to bf16.
struct AdamWHyper {
  float beta1, beta2, eps, weight_decay;
  float one_minus_beta1, one_minus_beta2;  ///< computed in double on the host: 1 - 0.999f is not 0.001f
};
void launch_adamw(float* parameters, const float* gradients, float* exp_avg, float* exp_avg_sq, void* bf16_copy,
                  int64_t n, const float* learning_rate, const float* step, const float* grad_scale, AdamWHyper hyper,
                  void* stream);

}  // namespace graphed::kernels
