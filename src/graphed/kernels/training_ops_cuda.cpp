// kernels/training_ops_cuda.cpp — kernels/training_ops.h on a CUDA build; training_ops_cpu.cpp is the CPU build's
// (one convention for the two builds: src/graphed/CMakeLists.txt). Each operation checks that its tensors fit the
// kernels (CUDA, dtypes, layout, sizes) and runs them as an autograd function; anything else goes to the ATen
// reference (training_ops_reference.cpp).
#include <limits>

#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/autograd/custom_function.h>

#include "graphed/kernels/accumulation_listeners.h"
#include "graphed/kernels/detail/aten_glue.h"
#include "graphed/kernels/detail/norm_steps.h"
#include "graphed/kernels/training_kernels.h"
#include "graphed/kernels/training_ops.h"

namespace graphed::kernels {
namespace {

using detail::accumulable;
using detail::as_bf16;
using detail::current_stream;
using detail::element_of;
using detail::or_empty;
using detail::present;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

bool is_cuda_of(const at::Tensor& tensor, at::ScalarType type) {
  return tensor.defined() && tensor.is_cuda() && tensor.scalar_type() == type;
}

float* mutable_float_pointer(const at::Tensor& tensor) { return tensor.defined() ? tensor.data_ptr<float>() : nullptr; }

/// The sums over the first dimension of fp32 partials [rows, columns] (and of second_partials, when
/// defined), in a fixed order, in one launch: into new tensors, or added to `into` (and second_into).
std::pair<at::Tensor, at::Tensor> column_sums(const at::Tensor& partials, const at::Tensor& second_partials,
                                              const at::Tensor& into = {}, const at::Tensor& second_into = {}) {
  const bool accumulate = into.defined();
  at::Tensor sums = accumulate ? into : at::empty({partials.size(1)}, partials.options());
  at::Tensor second_sums = accumulate ? second_into : second_partials.defined() ? at::empty_like(sums) : at::Tensor();
  launch_column_sums(partials.data_ptr<float>(), sums.data_ptr<float>(), mutable_float_pointer(second_partials),
                     mutable_float_pointer(second_sums), partials.size(0), partials.size(1), accumulate,
                     current_stream());
  return {sums, second_sums};
}

/// Whether the kernel can add `residual` (a gradient of the stream) to the input's gradient itself.
bool addable(const at::Tensor& residual, const at::Tensor& x) {
  return residual.defined() && residual.scalar_type() == x.scalar_type() && residual.is_contiguous() &&
         residual.sizes() == x.sizes();
}

}  // namespace

namespace detail {

NormSaved norm_statistics(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  const at::Tensor x = input.contiguous();
  const int64_t rows = x.numel() / x.size(-1);
  const auto statistics = x.options().dtype(at::kFloat);
  const at::Tensor rstd = at::empty({rows}, statistics);
  const bool layer_norm = present(bias);
  return {x, weight, layer_norm ? at::empty({rows}, statistics) : rstd, rstd, bias};  // RMSNorm has no mean
}

tensor_list norm_backward(const NormSaved& saved, const at::Tensor& grad_output, const at::Tensor& residual,
                          bool accumulate) {
  const at::Tensor& x = saved.input;
  const bool layer_norm = present(saved.bias);
  const at::Tensor dy = as_bf16(grad_output).contiguous();
  const int64_t columns = x.size(-1);
  const int64_t rows = x.numel() / columns;
  const int64_t partial_rows = norm_partial_rows(rows);
  const auto options = x.options().dtype(at::kFloat);
  const bool adds_residual = addable(residual, x);
  at::Tensor grad_input = at::empty_like(x);
  const at::Tensor weight_partials = at::empty({partial_rows, columns}, options);
  const at::Tensor bias_partials = layer_norm ? at::empty({partial_rows, columns}, options) : at::Tensor();
  launch_norm_backward(dy.data_ptr(), x.data_ptr(), element_of(x), saved.weight.data_ptr<float>(),
                       layer_norm ? saved.mean.data_ptr<float>() : nullptr, saved.rstd.data_ptr<float>(),
                       adds_residual ? residual.data_ptr() : nullptr, grad_input.data_ptr(),
                       weight_partials.data_ptr<float>(), mutable_float_pointer(bias_partials), rows, columns,
                       current_stream());
  if (residual.defined() && !adds_residual) grad_input = grad_input + residual;
  const bool in_place = accumulate && accumulable(saved.weight) && (!layer_norm || accumulable(saved.bias));
  if (in_place) {  // straight into the parameters' gradients: no gradient tensor, no AccumulateGrad add
    column_sums(weight_partials, bias_partials, saved.weight.grad(), layer_norm ? saved.bias.grad() : at::Tensor());
    gradient_accumulated(saved.weight);
    if (layer_norm) gradient_accumulated(saved.bias);
    return {grad_input, at::Tensor(), at::Tensor()};
  }
  auto [grad_weight, grad_bias] = column_sums(weight_partials, bias_partials);
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace detail

namespace {

/// The norm's forward for NormFunction and ResidualNormFunction: the bf16 output; saves what the
/// backward reads.
at::Tensor norm_forward(AutogradContext* context, const at::Tensor& input, const at::Tensor& weight,
                        const at::Tensor& bias, double epsilon, bool accumulate) {
  const detail::NormSaved saved = detail::norm_statistics(input, weight, bias);
  const at::Tensor& x = saved.input;
  const int64_t columns = x.size(-1);
  at::Tensor output = at::empty(x.sizes(), x.options().dtype(at::kBFloat16));
  const bool layer_norm = present(bias);
  launch_norm_forward(x.data_ptr(), element_of(x), weight.data_ptr<float>(),
                      layer_norm ? bias.data_ptr<float>() : nullptr, output.data_ptr(),
                      layer_norm ? saved.mean.data_ptr<float>() : nullptr, saved.rstd.data_ptr<float>(),
                      x.numel() / columns, columns, static_cast<float>(epsilon), current_stream());
  context->save_for_backward({x, weight, saved.mean, saved.rstd, bias});
  context->saved_data["accumulate"] = accumulate;
  return output;
}

/// The norm's backward from what norm_forward saved.
tensor_list norm_backward(AutogradContext* context, const at::Tensor& grad_output, const at::Tensor& residual) {
  const auto saved = context->get_saved_variables();
  return detail::norm_backward({saved[0], saved[1], saved[2], saved[3], saved[4]}, grad_output, residual,
                               context->saved_data["accumulate"].toBool());
}

struct NormFunction : torch::autograd::Function<NormFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& bias, double epsilon, bool accumulate) {
    return norm_forward(context, input, weight, bias, epsilon, accumulate);
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    tensor_list gradients = norm_backward(context, grads[0], at::Tensor());
    gradients.resize(5);  // none for epsilon and accumulate
    return gradients;
  }
};

/// {input, norm(input)}: the stream comes back as itself (autograd makes it a view), so the stream's
/// gradient arrives here beside the norm's and the kernel adds the two.
struct ResidualNormFunction : torch::autograd::Function<ResidualNormFunction> {
  static tensor_list forward(AutogradContext* context, const at::Tensor& input, const at::Tensor& weight,
                             const at::Tensor& bias, double epsilon, bool accumulate) {
    return {input, norm_forward(context, input, weight, bias, epsilon, accumulate)};
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    tensor_list gradients = norm_backward(context, grads[1], grads[0]);
    gradients.resize(5);
    return gradients;
  }
};

struct LinearFunction : torch::autograd::Function<LinearFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& weight_copy, const at::Tensor& bias, const at::Tensor& bias_copy,
                            bool accumulate) {
    const at::Tensor rows = as_bf16(input).reshape({-1, input.size(-1)});
    const at::Tensor output =
        present(bias_copy) ? at::addmm(bias_copy, rows, weight_copy.t()) : at::mm(rows, weight_copy.t());
    context->save_for_backward({rows, weight_copy, weight});
    context->saved_data["accumulate"] = accumulate;
    std::vector<int64_t> sizes = input.sizes().vec();
    sizes.back() = weight.size(0);
    return output.view(sizes);
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    const at::Tensor& rows = saved[0];
    const at::Tensor& weight_copy = saved[1];
    const at::Tensor dy = as_bf16(grads[0]).reshape({-1, weight_copy.size(0)});
    at::Tensor grad_input, grad_weight, grad_bias;
    if (context->needs_input_grad(0)) {
      std::vector<int64_t> sizes = grads[0].sizes().vec();
      sizes.back() = weight_copy.size(1);
      grad_input = at::mm(dy, weight_copy).view(sizes);
    }
    if (context->needs_input_grad(1)) {
      const at::Tensor& weight = saved[2];
      if (context->saved_data["accumulate"].toBool() && accumulable(weight)) {
        at::Tensor gradient = weight.grad();  // beta = 1 into the fp32 gradient: no gradient tensor, no add kernel
        at::addmm_out(gradient, gradient, dy.t(), rows, at::kFloat);
        gradient_accumulated(weight);
      } else {
        grad_weight = at::mm(dy.t(), rows, at::kFloat);  // fp32 out of the GEMM
      }
    }
    if (context->needs_input_grad(3)) {  // the column sums of dy as a GEMV with fp32 output: faster than a reduction
      grad_bias = at::mm(at::ones({1, dy.size(0)}, dy.options()), dy, at::kFloat).view({dy.size(1)});
    }
    return {grad_input, grad_weight, at::Tensor(), grad_bias, at::Tensor(), at::Tensor()};
  }
};

HeadStrides head_strides(const at::Tensor& x) {  // x [batch, heads, seq, head_dim]
  return {x.stride(0), x.stride(2), x.stride(1)};
}

/// Rotates x [batch, heads, seq, head_dim] into a new [batch, seq, heads, head_dim] buffer, returned as
/// a [batch, heads, seq, head_dim] view (the layout the attention kernels read).
at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool inverse) {
  const at::Tensor input = x.stride(3) == 1 ? x : x.contiguous();
  const int64_t batch = input.size(0), heads = input.size(1), seq = input.size(2), head_dim = input.size(3);
  const at::Tensor output = at::empty({batch, seq, heads, head_dim}, input.options()).transpose(1, 2);
  launch_rope(input.data_ptr(), head_strides(input), output.data_ptr(), head_strides(output), cos.data_ptr<float>(),
              sin.data_ptr<float>(), batch, seq, heads, head_dim, inverse, current_stream());
  return output;
}

struct RopeFunction : torch::autograd::Function<RopeFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& x, const at::Tensor& cos,
                            const at::Tensor& sin) {
    context->save_for_backward({cos, sin});
    return rotate(x, cos, sin, /*inverse=*/false);
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    return {rotate(as_bf16(grads[0]), saved[0], saved[1], /*inverse=*/true), at::Tensor(), at::Tensor()};
  }
};

struct SwigluFunction : torch::autograd::Function<SwigluFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& x) {
    const at::Tensor input = x.contiguous();
    const int64_t width = input.size(-1) / 2;
    std::vector<int64_t> sizes = input.sizes().vec();
    sizes.back() = width;
    at::Tensor output = at::empty(sizes, input.options());
    launch_swiglu_forward(input.data_ptr(), output.data_ptr(), input.numel() / input.size(-1), width, current_stream());
    context->save_for_backward({input});
    return output;
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const at::Tensor input = context->get_saved_variables()[0];
    const at::Tensor dy = as_bf16(grads[0]).contiguous();
    at::Tensor grad_input = at::empty_like(input);
    launch_swiglu_backward(dy.data_ptr(), input.data_ptr(), grad_input.data_ptr(), input.numel() / input.size(-1),
                           input.size(-1) / 2, current_stream());
    return {grad_input};
  }
};

struct ResidualAddFunction : torch::autograd::Function<ResidualAddFunction> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& hidden, const at::Tensor& update) {
    at::Tensor output = at::empty_like(hidden);
    launch_residual_add(hidden.data_ptr<float>(), update.data_ptr(), output.data_ptr<float>(), hidden.numel(),
                        current_stream());
    return output;
  }

  static tensor_list backward(AutogradContext*, tensor_list grads) {
    return {grads[0], as_bf16(grads[0])};  // what autograd's add gives: the stream's gradient, cast for the update
  }
};

/// Forward: the losses, and at once the gradients of hidden and of the master weight (for the mean
/// loss); backward: those gradients times the incoming one.
struct LinearCrossEntropyFunction : torch::autograd::Function<LinearCrossEntropyFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& hidden, const at::Tensor& weight,
                            const at::Tensor& weight_copy, const at::Tensor& labels, int64_t chunk_rows, bool with_grad,
                            bool accumulate) {
    const at::Tensor x = as_bf16(hidden).contiguous();
    const at::Tensor targets = labels.reshape({-1}).contiguous();
    const int64_t rows = x.size(0);
    const int64_t vocab = weight_copy.size(0);
    const at::Tensor losses = at::empty({rows}, x.options().dtype(at::kFloat));
    at::Tensor grad_hidden = with_grad ? at::empty_like(x) : at::Tensor();
    at::Tensor grad_weight;
    for (int64_t start = 0; start < rows; start += chunk_rows) {
      const int64_t count = std::min(chunk_rows, rows - start);
      const at::Tensor chunk = x.narrow(0, start, count);
      at::Tensor logits = at::mm(chunk, weight_copy.t());  // [count, vocab] bf16, then its gradient in place
      launch_cross_entropy(logits.data_ptr(), targets.data_ptr<int64_t>() + start, losses.data_ptr<float>() + start,
                           count, vocab, 1.0f / static_cast<float>(rows), current_stream());
      if (!with_grad) continue;
      at::Tensor rows_gradient = grad_hidden.narrow(0, start, count);
      at::mm_out(rows_gradient, logits, weight_copy);
      if (grad_weight.defined()) {
        at::addmm_out(grad_weight, grad_weight, logits.t(), chunk, at::kFloat);  // accumulate in the GEMM, fp32
      } else {
        grad_weight = at::mm(logits.t(), chunk, at::kFloat);
      }
    }
    if (with_grad) context->save_for_backward({grad_hidden, grad_weight, weight});
    context->saved_data["accumulate"] = accumulate;
    return losses.mean();
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    const at::Tensor& scale = grads[0];
    at::Tensor grad_hidden = context->needs_input_grad(0) ? saved[0] * scale : at::Tensor();
    at::Tensor grad_weight;
    if (context->needs_input_grad(1)) {
      const at::Tensor& weight = saved[2];
      if (context->saved_data["accumulate"].toBool() && accumulable(weight)) {
        weight.grad().addcmul_(saved[1], scale);  // .grad += gradient x scale: no product tensor, no add kernel
        gradient_accumulated(weight);
      } else {
        grad_weight = saved[1] * scale;
      }
    }
    return {grad_hidden, grad_weight, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

/// Whether the norm's kernels take these tensors.
bool norm_fits(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, at::ScalarType output_type) {
  return (is_cuda_of(input, at::kFloat) || is_cuda_of(input, at::kBFloat16)) && is_cuda_of(weight, at::kFloat) &&
         weight.is_contiguous() && (!bias.defined() || (is_cuda_of(bias, at::kFloat) && bias.is_contiguous())) &&
         output_type == at::kBFloat16 && input.numel() > 0 && norm_backward_fits(input.size(-1), bias.defined());
}

}  // namespace

bool training_kernels_supported(const at::Tensor& like) { return like.defined() && like.is_cuda(); }

at::Tensor norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, double epsilon,
                at::ScalarType output_type, bool accumulate_in_place) {
  if (!norm_fits(input, weight, bias, output_type)) return reference::norm(input, weight, bias, epsilon, output_type);
  return NormFunction::apply(input, weight, or_empty(bias, weight), epsilon, accumulate_in_place);
}

NormedStream residual_norm(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias, double epsilon,
                           at::ScalarType output_type, bool accumulate_in_place) {
  if (!norm_fits(hidden, weight, bias, output_type)) {
    return {hidden, reference::norm(hidden, weight, bias, epsilon, output_type)};
  }
  const tensor_list outputs =
      ResidualNormFunction::apply(hidden, weight, or_empty(bias, weight), epsilon, accumulate_in_place);
  return {outputs[0], outputs[1]};
}

at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_copy,
                  const at::Tensor& bias, const at::Tensor& bias_copy, bool accumulate_in_place) {
  const bool fits = input.is_cuda() && is_cuda_of(weight_copy, at::kBFloat16) &&
                    bias.defined() == bias_copy.defined() &&
                    (!bias_copy.defined() || bias_copy.scalar_type() == at::kBFloat16) && input.numel() > 0;
  if (!fits) return reference::linear(input, weight, bias);
  return LinearFunction::apply(input, weight, weight_copy, or_empty(bias, weight), or_empty(bias_copy, weight_copy),
                               accumulate_in_place);
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const bool fits = is_cuda_of(x, at::kBFloat16) && x.dim() == 4 && x.size(3) % 2 == 0 && is_cuda_of(cos, at::kFloat) &&
                    is_cuda_of(sin, at::kFloat) && cos.is_contiguous() && sin.is_contiguous() &&
                    cos.size(0) >= x.size(2) && cos.size(1) == x.size(3) / 2;
  if (!fits) return reference::rope(x, cos, sin);
  return RopeFunction::apply(x, cos, sin);
}

at::Tensor swiglu(const at::Tensor& x) {
  if (!is_cuda_of(x, at::kBFloat16) || x.size(-1) % 2 != 0) return reference::swiglu(x);
  return SwigluFunction::apply(x);
}

at::Tensor residual_add(const at::Tensor& hidden, const at::Tensor& update) {
  const bool fits = is_cuda_of(hidden, at::kFloat) && is_cuda_of(update, at::kBFloat16) && hidden.is_contiguous() &&
                    update.is_contiguous() && hidden.sizes() == update.sizes();
  if (!fits) return reference::residual_add(hidden, update);
  return ResidualAddFunction::apply(hidden, update);
}

at::Tensor linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& weight_copy,
                                const at::Tensor& labels, bool accumulate_in_place, int64_t chunk_bytes) {
  const bool fits = hidden.is_cuda() && hidden.dim() == 2 && is_cuda_of(weight_copy, at::kBFloat16) &&
                    is_cuda_of(weight, at::kFloat) && is_cuda_of(labels, at::kLong) &&
                    labels.numel() == hidden.size(0) && hidden.size(0) > 0;
  if (!fits) return reference::linear_cross_entropy(hidden, weight, labels);
  const int64_t row_bytes = weight_copy.size(0) * static_cast<int64_t>(sizeof(at::BFloat16));
  const int64_t chunk_rows = std::max<int64_t>(1, chunk_bytes / row_bytes);
  const bool with_grad = at::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  return LinearCrossEntropyFunction::apply(hidden, weight, weight_copy, labels, chunk_rows, with_grad,
                                           accumulate_in_place);
}

void adamw_step(const at::Tensor& parameters, const at::Tensor& gradients, const at::Tensor& exp_avg,
                const at::Tensor& exp_avg_sq, const at::Tensor& working_copy, const at::Tensor& learning_rate,
                const at::Tensor& step, const std::optional<at::Tensor>& grad_scale, const AdamWSettings& settings) {
  const auto flat_float = [&](const at::Tensor& t) {
    return is_cuda_of(t, at::kFloat) && t.is_contiguous() && t.numel() == parameters.numel();
  };
  const bool fits =
      flat_float(parameters) && flat_float(gradients) && flat_float(exp_avg) && flat_float(exp_avg_sq) &&
      (!working_copy.defined() || (is_cuda_of(working_copy, at::kBFloat16) && working_copy.is_contiguous() &&
                                   working_copy.numel() == parameters.numel())) &&
      is_cuda_of(learning_rate, at::kFloat) && is_cuda_of(step, at::kFloat) &&
      (!grad_scale || is_cuda_of(*grad_scale, at::kFloat));
  if (!fits) {
    reference::adamw_step(parameters, gradients, exp_avg, exp_avg_sq, working_copy, learning_rate, step, grad_scale,
                          settings);
    return;
  }
  const AdamWHyper hyper{static_cast<float>(settings.beta1),       static_cast<float>(settings.beta2),
                         static_cast<float>(settings.eps),         static_cast<float>(settings.weight_decay),
                         static_cast<float>(1.0 - settings.beta1), static_cast<float>(1.0 - settings.beta2)};
  launch_adamw(parameters.data_ptr<float>(), gradients.data_ptr<float>(), exp_avg.data_ptr<float>(),
               exp_avg_sq.data_ptr<float>(), working_copy.defined() ? working_copy.data_ptr() : nullptr,
               parameters.numel(), learning_rate.data_ptr<float>(), step.data_ptr<float>(),
               grad_scale ? grad_scale->data_ptr<float>() : nullptr, hyper, current_stream());
}

}  // namespace graphed::kernels
