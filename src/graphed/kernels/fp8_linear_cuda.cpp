// kernels/fp8_linear_cuda.cpp — kernels/fp8_linear.h on a CUDA build; fp8_linear_cpu.cpp is the CPU build's (one
// convention for the two builds: src/graphed/CMakeLists.txt). The GEMMs are at::_scaled_mm with
// per-tensor inverse scales: on Hopper its first operand must be row-major and its second column-major,
// so the backward reads transposed FP8 copies (the weight's, made with its cast; the input's and the output
// gradient's, written by their casts). The forward accumulates fast (TransformerEngine's choice for
// fprop), the backward's two GEMMs in full precision.
#include <cstdint>
#include <optional>

#include <ATen/core/grad_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/custom_function.h>

#include "graphed/kernels/accumulation_listeners.h"
#include "graphed/kernels/detail/aten_glue.h"
#include "graphed/kernels/detail/norm_steps.h"
#include "graphed/kernels/fp8_gemm.h"
#include "graphed/kernels/fp8_kernels.h"
#include "graphed/kernels/fp8_linear.h"
#include "graphed/kernels/training_kernels.h"
#include "graphed/util/error.h"

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

bool delayed(const Fp8Slot& slot) { return slot.scale.defined(); }

/// Where a cast records its amax: the delayed slot's, when asked to; else nowhere (null).
float* recorded_amax(const Fp8Slot& slot, bool record) {
  return record && delayed(slot) ? slot.amax.data_ptr<float>() : nullptr;
}

/// Whether autograd will want a gradient for this (optional) input.
bool needs_gradient(const at::Tensor& tensor) { return tensor.defined() && tensor.requires_grad(); }

/// IValues hold tensors, not structs: a slot as three saved tensors (empty ones for current scaling).
void save_slot(AutogradContext* context, const Fp8Slot& slot, const at::Tensor& like) {
  const at::Tensor none = at::empty({0}, like.options().dtype(at::kFloat));
  context->saved_data["gradient_scale"] = delayed(slot) ? slot.scale : none;
  context->saved_data["gradient_scale_inverse"] = delayed(slot) ? slot.scale_inverse : none;
  context->saved_data["gradient_amax"] = delayed(slot) ? slot.amax : none;
}

Fp8Slot saved_slot(AutogradContext* context) {
  Fp8Slot slot{context->saved_data["gradient_scale"].toTensor(),
               context->saved_data["gradient_scale_inverse"].toTensor(),
               context->saved_data["gradient_amax"].toTensor()};
  return slot.scale.numel() > 0 ? slot : Fp8Slot{};
}

at::Tensor scaled_mm(const Fp8Tensor& first, const at::Tensor& second, const at::Tensor& second_scale_inverse,
                     const at::Tensor& bias, at::ScalarType output_type, bool fast_accumulation) {
  std::optional<at::Tensor> bias_argument;
  if (bias.defined() && present(bias)) {  // cuBLASLt wants it 16-byte aligned; a view into a flat buffer may not be
    bias_argument = detail::aligned_16_copy(bias);
  }
  return at::_scaled_mm(first.data, second, first.scale_inverse, second_scale_inverse, bias_argument,
                        /*scale_result=*/std::nullopt, output_type, fast_accumulation);
}

/// Casts `input` (contiguous) into `into`: data, and its transpose where `into.transposed` is defined, at
/// `scale`, recording the amax where `amax` is not null; SwiGLU's output of it with that transform.
void cast_into(const at::Tensor& input, Fp8InputTransform transform, Fp8Format format, const at::Tensor& scale,
               float* amax, const Fp8Tensor& into) {
  const bool e5m2 = format == Fp8Format::kE5M2;
  const bool transpose = into.transposed.defined();
  void* transposed = transpose ? into.transposed.data_ptr() : nullptr;
  if (transform == Fp8InputTransform::kSwiglu) {
    launch_swiglu_cast_transpose_to_fp8(input.data_ptr(), input.size(0), input.size(1) / 2, scale.data_ptr<float>(),
                                        into.data.data_ptr(), transposed, e5m2, amax, current_stream());
  } else if (transpose && cast_transpose_fits(input.size(0), input.size(1))) {
    launch_cast_transpose_to_fp8(input.data_ptr(), element_of(input), input.size(0), input.size(1),
                                 scale.data_ptr<float>(), into.data.data_ptr(), transposed, e5m2, amax,
                                 current_stream());
  } else {
    launch_cast_to_fp8(input.data_ptr(), element_of(input), input.numel(), scale.data_ptr<float>(),
                       into.data.data_ptr(), e5m2, amax, current_stream());
    if (transpose) into.transposed.copy_(into.data.t());
  }
}

/// The scale to cast `input` with, its inverse written into scale_inverse: the slot's (delayed), or from
/// the amax of transform(input), computed first (current scaling).
at::Tensor scale_for(const at::Tensor& input, Fp8InputTransform transform, Fp8Format format, const Fp8Slot& slot,
                     const at::Tensor& scale_inverse) {
  if (delayed(slot)) {  // copied out: a slot's view sits 4 bytes per slot into its state, not 16-byte aligned
    scale_inverse.copy_(slot.scale_inverse);
    return slot.scale;
  }
  const auto options = input.options().dtype(at::kFloat);
  const at::Tensor amax = at::zeros({1}, options);
  const at::Tensor scale = at::empty({1}, options);
  if (transform == Fp8InputTransform::kSwiglu) {
    launch_swiglu_amax(input.data_ptr(), input.size(0), input.size(1) / 2, amax.data_ptr<float>(), current_stream());
  } else {
    launch_amax(input.data_ptr(), element_of(input), input.numel(), amax.data_ptr<float>(), current_stream());
  }
  launch_scale_from_amax(amax.data_ptr<float>(), static_cast<float>(fp8_max(format)), scale.data_ptr<float>(),
                         scale_inverse.data_ptr<float>(), current_stream());
  return scale;
}

/// dyᵀ [out, rows] x input [rows, in] in fp32: added to the weight's .grad where `accumulate` and .grad can take
/// it (inside the FP8 GEMM where cuBLASLt has one, else after it), returning an undefined tensor; else returned.
/// input_for_weight is the FP8 input column-major (fp8) or the bf16 rows.
at::Tensor weight_gradient(const at::Tensor& weight, const Fp8Tensor& gradient, const at::Tensor& dy,
                           const at::Tensor& input_for_weight, const at::Tensor& input_scale_inverse, bool fp8,
                           bool accumulate) {
  const bool in_place = accumulate && accumulable(weight);
  if (in_place && fp8) {
    at::Tensor sum = weight.grad();
    if (fp8_gemm_accumulate(gradient.transposed, gradient.scale_inverse, input_for_weight.t(), input_scale_inverse,
                            sum)) {
      gradient_accumulated(weight);
      return {};
    }
  }
  const at::Tensor product = fp8 ? scaled_mm(Fp8Tensor{gradient.transposed, gradient.scale_inverse}, input_for_weight,
                                             input_scale_inverse, {}, at::kFloat, false)
                                 : at::mm(dy.t(), input_for_weight, at::kFloat);
  if (!in_place) return product;
  weight.grad().add_(product);
  gradient_accumulated(weight);
  return {};
}

/// What both FP8 functions' backward reads of the linear, beside its saved tensors.
void save_linear_settings(AutogradContext* context, const Fp8LinearRecipe& recipe, const Fp8Slot& gradient_slot,
                          bool accumulate, bool record, const at::Tensor& like) {
  context->saved_data["accumulate"] = accumulate;
  context->saved_data["fp8_weight_gradient"] = recipe.fp8_weight_gradient;
  context->saved_data["e5m2"] = recipe.gradient_format == Fp8Format::kE5M2;
  save_slot(context, gradient_slot, like);
  context->saved_data["record"] = record;
}

/// The linear's saved tensors: the input for the weight's gradient (FP8 column-major, or the bf16 rows) and
/// its inverse scale, the weight's cast column-major and its inverse scale, and the master weight.
struct LinearSaved {
  at::Tensor input_for_weight, input_scale_inverse, weight_column_major, weight_scale_inverse, weight;
};

struct LinearGradients {
  at::Tensor read;  ///< of what the GEMM read, bf16 [rows, in] (undefined unless asked)
  at::Tensor weight, bias;
};

/// The FP8 linear's backward for dy [rows, out]: the output's gradient cast (recording its amax), the
/// gradient of what the GEMM read, the weight's (into .grad where it accumulates) and the bias's.
LinearGradients linear_backward(AutogradContext* context, const LinearSaved& saved, const at::Tensor& dy,
                                bool needs_read, bool needs_weight, bool needs_bias) {
  const Fp8Format format = context->saved_data["e5m2"].toBool() ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
  const bool fp8_weight_gradient = needs_weight && context->saved_data["fp8_weight_gradient"].toBool();
  const Fp8Tensor gradient =
      quantize_fp8(dy, format, saved_slot(context), context->saved_data["record"].toBool(), fp8_weight_gradient);
  LinearGradients gradients;
  if (needs_read) {  // dy [rows, out] x weight [out, in], the weight column-major
    gradients.read =
        scaled_mm(gradient, saved.weight_column_major, saved.weight_scale_inverse, {}, at::kBFloat16, false);
  }
  if (needs_weight) {
    gradients.weight = weight_gradient(saved.weight, gradient, dy, saved.input_for_weight, saved.input_scale_inverse,
                                       fp8_weight_gradient, context->saved_data["accumulate"].toBool());
  }
  if (needs_bias) gradients.bias = at::mm(at::ones({1, dy.size(0)}, dy.options()), dy, at::kFloat).view({dy.size(1)});
  return gradients;
}

/// The input's gradient through the transform, from the gradient of what the GEMM read (bf16 [rows, in]).
at::Tensor through_transform(const at::Tensor& grad_read, const at::Tensor& transform_input) {
  if (!transform_input.defined()) return grad_read;  // no transform: the GEMM read the input itself
  const int64_t rows = grad_read.size(0), width = grad_read.size(1);
  at::Tensor grad_input = at::empty({rows, 2 * width}, grad_read.options());
  launch_swiglu_backward(grad_read.data_ptr(), transform_input.data_ptr(), grad_input.data_ptr(), rows, width,
                         current_stream());
  return grad_input;
}

std::vector<int64_t> with_last(at::IntArrayRef sizes, int64_t last) {
  std::vector<int64_t> result = sizes.vec();
  result.back() = last;
  return result;
}

struct Fp8LinearFunction : torch::autograd::Function<Fp8LinearFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& weight_data, const at::Tensor& weight_transposed,
                            const at::Tensor& weight_scale_inverse, const at::Tensor& bias, const at::Tensor& bias_copy,
                            const Fp8LinearRecipe& recipe, const Fp8LinearScaling& scaling, bool accumulate,
                            bool record, bool backward, Fp8InputTransform transform) {
    const at::Tensor rows = as_bf16(input).reshape({-1, input.size(-1)});
    // The backward reads the input column-major where its GEMM is FP8: the cast writes the transpose as well.
    const bool fp8_input_for_weight = backward && recipe.fp8_weight_gradient;
    const Fp8Tensor x = quantize_fp8(rows, Fp8Format::kE4M3, scaling.input, record, fp8_input_for_weight, transform);
    const at::Tensor output = scaled_mm(x, weight_data.t(), weight_scale_inverse, bias_copy, at::kBFloat16, true);
    if (backward) {
      const at::Tensor input_for_weight = fp8_input_for_weight ? x.transposed.t() : rows;
      const at::Tensor transform_input = transform == Fp8InputTransform::kSwiglu ? rows.contiguous() : at::Tensor();
      context->save_for_backward({input_for_weight, x.scale_inverse, weight_transposed.t(), weight_scale_inverse,
                                  weight, or_empty(transform_input, rows)});
    }
    save_linear_settings(context, recipe, scaling.gradient, accumulate, record, rows);
    return output.view(with_last(input.sizes(), weight.size(0)));
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    const at::Tensor& weight = saved[4];
    const at::Tensor dy = as_bf16(grads[0]).reshape({-1, weight.size(0)});
    const LinearGradients linear =
        linear_backward(context, {saved[0], saved[1], saved[2], saved[3], weight}, dy, context->needs_input_grad(0),
                        context->needs_input_grad(1), context->needs_input_grad(5));
    tensor_list gradients(13);
    if (linear.read.defined()) {
      const at::Tensor transform_input = present(saved[5]) ? saved[5] : at::Tensor();
      const at::Tensor grad_input = through_transform(linear.read, transform_input);
      gradients[0] = grad_input.view(with_last(grads[0].sizes(), grad_input.size(1)));
    }
    gradients[1] = linear.weight;
    gradients[5] = linear.bias;
    return gradients;
  }
};

/// {hidden, linear(norm(hidden))}: the norm's kernel writes the linear's E4M3 input itself (delayed scale), and
/// the backward runs the linear's and then the norm's, the stream's gradient added in the norm's kernel.
struct Fp8NormLinearFunction : torch::autograd::Function<Fp8NormLinearFunction> {
  static tensor_list forward(AutogradContext* context, const at::Tensor& hidden, const at::Tensor& norm_weight,
                             const at::Tensor& norm_bias, const at::Tensor& weight, const at::Tensor& weight_data,
                             const at::Tensor& weight_transposed, const at::Tensor& weight_scale_inverse,
                             const at::Tensor& bias, const at::Tensor& bias_copy, double epsilon,
                             const Fp8LinearRecipe& recipe, const Fp8LinearScaling& scaling, bool accumulate,
                             bool record, bool backward) {
    const detail::NormSaved norm = detail::norm_statistics(hidden, norm_weight, norm_bias);
    const at::Tensor& x = norm.input;
    const int64_t columns = x.size(-1);
    const int64_t rows = x.numel() / columns;
    const bool layer_norm = present(norm_bias);
    const auto options = x.options().dtype(at::kFloat8_e4m3fn);
    const Fp8Tensor cast{at::empty({rows, columns}, options), at::empty({1}, x.options().dtype(at::kFloat))};
    const at::Tensor scale =
        scale_for(x, Fp8InputTransform::kNone, Fp8Format::kE4M3, scaling.input, cast.scale_inverse);
    launch_norm_forward_to_fp8(x.data_ptr(), element_of(x), norm_weight.data_ptr<float>(),
                               layer_norm ? norm_bias.data_ptr<float>() : nullptr, scale.data_ptr<float>(),
                               cast.data.data_ptr(), recorded_amax(scaling.input, record),
                               layer_norm ? norm.mean.data_ptr<float>() : nullptr, norm.rstd.data_ptr<float>(), rows,
                               columns, static_cast<float>(epsilon), current_stream());
    const at::Tensor output = scaled_mm(cast, weight_data.t(), weight_scale_inverse, bias_copy, at::kBFloat16, true);
    if (backward) {
      const at::Tensor transposed = at::empty({columns, rows}, options);
      launch_transpose_fp8(cast.data.data_ptr(), rows, columns, transposed.data_ptr(), current_stream());
      context->save_for_backward({transposed.t(), cast.scale_inverse, weight_transposed.t(), weight_scale_inverse,
                                  weight, x, norm_weight, norm.mean, norm.rstd, norm_bias});
    }
    save_linear_settings(context, recipe, scaling.gradient, accumulate, record, x);
    context->saved_data["rows"] = rows;
    return {hidden, output.view(with_last(hidden.sizes(), weight.size(0)))};
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    const at::Tensor& weight = saved[4];
    const at::Tensor dy = as_bf16(grads[1]).reshape({context->saved_data["rows"].toInt(), weight.size(0)});
    const bool needs_norm =
        context->needs_input_grad(0) || context->needs_input_grad(1) || context->needs_input_grad(2);
    const LinearGradients linear =
        linear_backward(context, {saved[0], saved[1], saved[2], saved[3], weight}, dy, needs_norm,
                        context->needs_input_grad(3), context->needs_input_grad(7));
    tensor_list gradients(15);
    if (needs_norm) {
      const tensor_list norm = detail::norm_backward({saved[5], saved[6], saved[7], saved[8], saved[9]}, linear.read,
                                                     grads[0], context->saved_data["accumulate"].toBool());
      gradients[0] = norm[0];
      gradients[1] = norm[1];
      gradients[2] = norm[2];
    }
    gradients[3] = linear.weight;
    gradients[7] = linear.bias;
    return gradients;
  }
};

at::ScalarType fp8_type(Fp8Format format) { return format == Fp8Format::kE5M2 ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn; }

}  // namespace

bool fp8_supported(const at::Device& device, std::string* why_not) {
  if (!device.is_cuda()) {
    if (why_not) *why_not = "the device is the CPU (" + device.str() + ")";
    return false;
  }
  const int index = device.index() < 0 ? 0 : device.index();
  const cudaDeviceProp* properties = at::cuda::getDeviceProperties(index);
  const std::string capability = std::to_string(properties->major) + "." + std::to_string(properties->minor);
  if (properties->major < 8 || (properties->major == 8 && properties->minor < 9)) {
    if (why_not) {
      *why_not = std::string(properties->name) + " has compute capability " + capability +
                 ", without FP8 tensor cores (8.9 or more: Ada, Hopper, Blackwell)";
    }
    return false;
  }
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
  if (!fp8_kernels_built_for_current_device()) {
    if (why_not) {
      *why_not = "this binary's kernels were built for another GPU than " + std::string(properties->name) +
                 " (compute capability " + capability + "; rebuild with TORCH_CUDA_ARCH_LIST=" + capability + ")";
    }
    return false;
  }
  return true;
}

Fp8Tensor quantize_fp8(const at::Tensor& x, Fp8Format format, const Fp8Slot& slot, bool record, bool transpose,
                       Fp8InputTransform transform) {
  at::Tensor input = x.contiguous();
  GRAPHED_INTERNAL_ASSERT(
      input.is_cuda() && (input.scalar_type() == at::kBFloat16 || input.scalar_type() == at::kFloat),
      "FP8 casts take bf16 or fp32 CUDA tensors");
  GRAPHED_INTERNAL_ASSERT(!transpose || input.dim() == 2, "an FP8 cast's transpose is of a matrix");
  if (transform == Fp8InputTransform::kSwiglu) {
    GRAPHED_INTERNAL_ASSERT(input.dim() == 2 && input.scalar_type() == at::kBFloat16 && input.size(1) % 2 == 0,
                            "a SwiGLU cast takes a bf16 matrix of an even width");
    if (!cast_transpose_fits(input.size(0), input.size(1) / 2)) {  // SwiGLU first, then the plain cast
      at::Tensor activated = at::empty({input.size(0), input.size(1) / 2}, input.options());
      launch_swiglu_forward(input.data_ptr(), activated.data_ptr(), input.size(0), input.size(1) / 2, current_stream());
      return quantize_fp8(activated, format, slot, record, transpose);
    }
  }
  std::vector<int64_t> sizes = input.sizes().vec();
  if (transform == Fp8InputTransform::kSwiglu) sizes.back() /= 2;
  const auto options = input.options().dtype(fp8_type(format));
  Fp8Tensor result;
  result.data = at::empty(sizes, options);
  if (transpose) result.transposed = at::empty({sizes[1], sizes[0]}, options);
  result.scale_inverse = at::empty({1}, input.options().dtype(at::kFloat));
  const at::Tensor scale = scale_for(input, transform, format, slot, result.scale_inverse);
  cast_into(input, transform, format, scale, recorded_amax(slot, record), result);
  return result;
}

Fp8Tensor empty_fp8_matrix(const at::Tensor& like, Fp8Format format) {
  const auto options = like.options().dtype(fp8_type(format));
  return {at::empty({like.size(0), like.size(1)}, options), at::empty({1}, like.options().dtype(at::kFloat)),
          at::empty({like.size(1), like.size(0)}, options)};
}

void quantize_fp8_into(const at::Tensor& x, Fp8Format format, const Fp8Slot& slot, bool record, const Fp8Tensor& into) {
  const at::Tensor input = x.contiguous();
  GRAPHED_INTERNAL_ASSERT(input.is_cuda() && input.dim() == 2 && into.data.sizes() == input.sizes() &&
                              detail::aligned_16(into.scale_inverse),
                          "an FP8 cast in place takes a CUDA matrix and buffers of its shape");
  const at::Tensor scale = scale_for(input, Fp8InputTransform::kNone, format, slot, into.scale_inverse);
  cast_into(input, Fp8InputTransform::kNone, format, scale, recorded_amax(slot, record), into);
}

at::Tensor fp8_linear(const at::Tensor& input, const at::Tensor& weight, const Fp8Tensor& weight_fp8,
                      const at::Tensor& bias, const at::Tensor& bias_copy, const Fp8LinearRecipe& recipe,
                      const Fp8LinearScaling& scaling, bool accumulate_in_place, bool record_amax,
                      Fp8InputTransform transform) {
  GRAPHED_INTERNAL_ASSERT(weight_fp8.data.defined() && weight_fp8.transposed.defined(),
                          "an FP8 linear reads the weight's E4M3 cast and its transpose");
  GRAPHED_INTERNAL_ASSERT(bias.defined() == bias_copy.defined(), "an FP8 linear's bias comes with its working copy");
  GRAPHED_INTERNAL_ASSERT(transform == Fp8InputTransform::kNone || recipe.fp8_weight_gradient,
                          "a SwiGLU-fused FP8 linear keeps no bf16 input for a bf16 weight gradient");
  // Inside forward autograd is off: whether a backward will follow is asked here.
  const bool backward =
      at::GradMode::is_enabled() && (needs_gradient(input) || needs_gradient(weight) || needs_gradient(bias));
  return Fp8LinearFunction::apply(input, weight, weight_fp8.data, weight_fp8.transposed, weight_fp8.scale_inverse,
                                  or_empty(bias, weight), or_empty(bias_copy, weight_fp8.scale_inverse), recipe,
                                  scaling, accumulate_in_place, record_amax, backward, transform);
}

bool fp8_norm_linear_fits(const at::Tensor& hidden, const at::Tensor& norm_weight, const at::Tensor& norm_bias,
                          const Fp8LinearRecipe& recipe, const Fp8LinearScaling& scaling) {
  const auto cuda_of = [](const at::Tensor& tensor, at::ScalarType type) {
    return tensor.defined() && tensor.is_cuda() && tensor.scalar_type() == type && tensor.is_contiguous();
  };
  if (!delayed(scaling.input) || !recipe.fp8_weight_gradient || hidden.dim() < 2) return false;
  const int64_t columns = hidden.size(-1);
  const int64_t rows = columns > 0 ? hidden.numel() / columns : 0;
  return (cuda_of(hidden, at::kFloat) || cuda_of(hidden, at::kBFloat16)) && cuda_of(norm_weight, at::kFloat) &&
         (!norm_bias.defined() || cuda_of(norm_bias, at::kFloat)) && rows > 0 && rows % 16 == 0 && columns % 16 == 0 &&
         cast_transpose_fits(rows, columns) && norm_backward_fits(columns, norm_bias.defined());
}

Fp8NormLinear fp8_norm_linear(const at::Tensor& hidden, const at::Tensor& norm_weight, const at::Tensor& norm_bias,
                              double epsilon, const at::Tensor& weight, const Fp8Tensor& weight_fp8,
                              const at::Tensor& bias, const at::Tensor& bias_copy, const Fp8LinearRecipe& recipe,
                              const Fp8LinearScaling& scaling, bool accumulate_in_place, bool record_amax) {
  GRAPHED_INTERNAL_ASSERT(fp8_norm_linear_fits(hidden, norm_weight, norm_bias, recipe, scaling),
                          "an FP8 norm-linear its caller did not check (fp8_norm_linear_fits)");
  GRAPHED_INTERNAL_ASSERT(bias.defined() == bias_copy.defined(), "an FP8 linear's bias comes with its working copy");
  const bool backward =
      at::GradMode::is_enabled() && (needs_gradient(hidden) || needs_gradient(weight) || needs_gradient(norm_weight) ||
                                     needs_gradient(norm_bias) || needs_gradient(bias));
  const tensor_list outputs = Fp8NormLinearFunction::apply(
      hidden, norm_weight, or_empty(norm_bias, norm_weight), weight, weight_fp8.data, weight_fp8.transposed,
      weight_fp8.scale_inverse, or_empty(bias, weight), or_empty(bias_copy, weight_fp8.scale_inverse), epsilon, recipe,
      scaling, accumulate_in_place, record_amax, backward);
  return {outputs[0], outputs[1]};
}

}  // namespace graphed::kernels
