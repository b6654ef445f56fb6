// kernels/fp8_linear_cuda.cpp — kernels/fp8_linear.h on a CUDA build. The GEMMs are at::_scaled_mm with
// per-tensor inverse scales: on Hopper its first operand must be row-major and its second column-major,
// so the backward transposes the FP8 copies it needs (the weight for the input's gradient; the input and
// the output's gradient for the weight's). The forward accumulates fast (TransformerEngine's choice for
// fprop), the backward's two GEMMs in full precision.
#include <cstdint>
#include <optional>

#include <ATen/core/grad_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/custom_function.h>

#include "graphed/kernels/accumulation_listeners.h"
#include "graphed/kernels/detail/aten_glue.h"
#include "graphed/kernels/fp8_gemm.h"
#include "graphed/kernels/fp8_kernels.h"
#include "graphed/kernels/fp8_linear.h"
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

struct Fp8LinearFunction : torch::autograd::Function<Fp8LinearFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& weight_copy, const at::Tensor& bias, const at::Tensor& bias_copy,
                            const Fp8LinearRecipe& recipe, const Fp8LinearScaling& scaling, bool accumulate,
                            bool record, bool backward) {
    const at::Tensor rows = as_bf16(input).reshape({-1, input.size(-1)});
    // The backward reads the weight column-major, and the input too where its GEMM is FP8: their casts
    // write the transposes as well.
    const bool fp8_input_for_weight = backward && recipe.fp8_weight_gradient;
    const Fp8Tensor x = quantize_fp8(rows, Fp8Format::kE4M3, scaling.input, record, fp8_input_for_weight);
    const Fp8Tensor w = quantize_fp8(weight_copy, Fp8Format::kE4M3, scaling.weight, record, backward);
    const at::Tensor output = scaled_mm(x, w.data.t(), w.scale_inverse, bias_copy, at::kBFloat16, true);
    if (backward) {
      const at::Tensor input_for_weight = fp8_input_for_weight ? x.transposed.t() : rows;
      context->save_for_backward({input_for_weight, x.scale_inverse, w.transposed.t(), w.scale_inverse, weight});
    }
    context->saved_data["accumulate"] = accumulate;
    context->saved_data["fp8_weight_gradient"] = recipe.fp8_weight_gradient;
    context->saved_data["e5m2"] = recipe.gradient_format == Fp8Format::kE5M2;
    save_slot(context, scaling.gradient, rows);
    context->saved_data["record"] = record;
    std::vector<int64_t> sizes = input.sizes().vec();
    sizes.back() = weight.size(0);
    return output.view(sizes);
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    const at::Tensor& weight = saved[4];
    const int64_t out_features = weight.size(0);
    const at::Tensor dy = as_bf16(grads[0]).reshape({-1, out_features});
    const Fp8Format format = context->saved_data["e5m2"].toBool() ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
    const bool fp8_weight_gradient =
        context->needs_input_grad(1) && context->saved_data["fp8_weight_gradient"].toBool();
    const Fp8Tensor gradient =
        quantize_fp8(dy, format, saved_slot(context), context->saved_data["record"].toBool(), fp8_weight_gradient);
    at::Tensor grad_input, grad_weight, grad_bias;
    if (context->needs_input_grad(0)) {  // dy [rows, out] x weight [out, in], the weight column-major
      std::vector<int64_t> sizes = grads[0].sizes().vec();
      sizes.back() = weight.size(1);
      grad_input = scaled_mm(gradient, saved[2], saved[3], {}, at::kBFloat16, false).view(sizes);
    }
    if (context->needs_input_grad(1)) {
      grad_weight = weight_gradient(weight, gradient, dy, saved[0], saved[1], fp8_weight_gradient,
                                    context->saved_data["accumulate"].toBool());
    }
    if (context->needs_input_grad(3)) {
      grad_bias = at::mm(at::ones({1, dy.size(0)}, dy.options()), dy, at::kFloat).view({dy.size(1)});
    }
    return {grad_input,   grad_weight,  at::Tensor(), grad_bias,    at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

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

Fp8Tensor quantize_fp8(const at::Tensor& x, Fp8Format format, const Fp8Slot& slot, bool record, bool transpose) {
  const at::Tensor input = x.contiguous();
  GRAPHED_INTERNAL_ASSERT(
      input.is_cuda() && (input.scalar_type() == at::kBFloat16 || input.scalar_type() == at::kFloat),
      "FP8 casts take bf16 or fp32 CUDA tensors");
  GRAPHED_INTERNAL_ASSERT(!transpose || input.dim() == 2, "an FP8 cast's transpose is of a matrix");
  Fp8Tensor result;
  at::Tensor scale = slot.scale;
  if (delayed(slot)) {
    // cuBLASLt wants 16-byte aligned scale pointers, and a slot's view sits 4 bytes per slot into its state.
    result.scale_inverse = slot.scale_inverse.clone();
  } else {  // current scaling: the amax first, then the scale from it
    const auto options = input.options().dtype(at::kFloat);
    const at::Tensor amax = at::zeros({1}, options);
    scale = at::empty({1}, options);
    result.scale_inverse = at::empty({1}, options);
    launch_amax(input.data_ptr(), element_of(input), input.numel(), amax.data_ptr<float>(), current_stream());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    launch_scale_from_amax(amax.data_ptr<float>(), static_cast<float>(fp8_max(format)), scale.data_ptr<float>(),
                           result.scale_inverse.data_ptr<float>(), current_stream());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    record = false;
  }
  const bool e5m2 = format == Fp8Format::kE5M2;
  const auto options = input.options().dtype(e5m2 ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn);
  result.data = at::empty(input.sizes(), options);
  float* amax = record ? slot.amax.data_ptr<float>() : nullptr;
  if (transpose && cast_transpose_fits(input.size(0), input.size(1))) {
    result.transposed = at::empty({input.size(1), input.size(0)}, options);
    launch_cast_transpose_to_fp8(input.data_ptr(), element_of(input), input.size(0), input.size(1),
                                 scale.data_ptr<float>(), result.data.data_ptr(), result.transposed.data_ptr(), e5m2,
                                 amax, current_stream());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return result;
  }
  launch_cast_to_fp8(input.data_ptr(), element_of(input), input.numel(), scale.data_ptr<float>(),
                     result.data.data_ptr(), e5m2, amax, current_stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (transpose) result.transposed = result.data.t().contiguous();
  return result;
}

at::Tensor fp8_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_copy,
                      const at::Tensor& bias, const at::Tensor& bias_copy, const Fp8LinearRecipe& recipe,
                      const Fp8LinearScaling& scaling, bool accumulate_in_place, bool record_amax) {
  GRAPHED_INTERNAL_ASSERT(weight_copy.defined() && weight_copy.scalar_type() == at::kBFloat16,
                          "an FP8 linear reads the weight's bf16 working copy");
  GRAPHED_INTERNAL_ASSERT(bias.defined() == bias_copy.defined(), "an FP8 linear's bias comes with its working copy");
  // Inside forward autograd is off: whether a backward will follow is asked here.
  const bool backward = at::GradMode::is_enabled() &&
                        (input.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  return Fp8LinearFunction::apply(input, weight, weight_copy, or_empty(bias, weight), or_empty(bias_copy, weight_copy),
                                  recipe, scaling, accumulate_in_place, record_amax, backward);
}

}  // namespace graphed::kernels
