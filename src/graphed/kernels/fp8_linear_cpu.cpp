// kernels/fp8_linear_cpu.cpp — kernels/fp8_linear.h on a CPU build, in place of fp8_linear_cuda.cpp (one
// convention for the two builds: src/graphed/CMakeLists.txt): no device has FP8 tensor cores here, and the trainer
// refuses FP8 before any linear could run (so these operations are never reached).
#include "graphed/kernels/fp8_linear.h"

#include "graphed/util/error.h"

namespace graphed::kernels {

bool fp8_supported(const at::Device& device, std::string* why_not) {
  if (why_not) {
    *why_not = "this graphed binary was built against a CPU-only LibTorch, so no device (here " + device.str() +
               ") can run FP8 GEMMs";
  }
  return false;
}

Fp8Tensor quantize_fp8(const at::Tensor&, Fp8Format, const Fp8Slot&, bool, bool, Fp8InputTransform) {
  GRAPHED_INTERNAL_ASSERT(false, "FP8 casts need a CUDA build (the trainer checks fp8_supported first)");
  return {};
}

void quantize_fp8_into(const at::Tensor&, Fp8Format, const Fp8Slot&, bool, const Fp8Tensor&) {
  GRAPHED_INTERNAL_ASSERT(false, "FP8 casts need a CUDA build (the trainer checks fp8_supported first)");
}

Fp8Tensor empty_fp8_matrix(const at::Tensor&, Fp8Format) {
  GRAPHED_INTERNAL_ASSERT(false, "FP8 tensors need a CUDA build (the trainer checks fp8_supported first)");
  return {};
}

at::Tensor fp8_linear(const at::Tensor&, const at::Tensor&, const Fp8Tensor&, const at::Tensor&, const at::Tensor&,
                      const Fp8LinearRecipe&, const Fp8LinearScaling&, bool, bool, Fp8InputTransform) {
  GRAPHED_INTERNAL_ASSERT(false, "FP8 linears need a CUDA build (the trainer checks fp8_supported first)");
  return {};
}

bool fp8_norm_linear_fits(const at::Tensor&, const at::Tensor&, const at::Tensor&, const Fp8LinearRecipe&,
                          const Fp8LinearScaling&) {
  return false;
}

Fp8NormLinear fp8_norm_linear(const at::Tensor&, const at::Tensor&, const at::Tensor&, double, const at::Tensor&,
                              const Fp8Tensor&, const at::Tensor&, const at::Tensor&, const Fp8LinearRecipe&,
                              const Fp8LinearScaling&, bool, bool) {
  GRAPHED_INTERNAL_ASSERT(false, "FP8 linears need a CUDA build (the trainer checks fp8_supported first)");
  return {};
}

}  // namespace graphed::kernels
