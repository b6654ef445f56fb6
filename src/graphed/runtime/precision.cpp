// runtime/precision.cpp — see runtime/precision.h.
#include "graphed/runtime/precision.h"

namespace graphed::runtime {

Precision choose_precision(bool bf16_requested, const c10::Device& device) {
  return bf16_requested && device.is_cuda() ? Precision::kBFloat16Autocast : Precision::kFloat32;
}

std::string describe(Precision precision) { return autocasts(precision) ? "bf16 autocast" : "fp32"; }

}  // namespace graphed::runtime
