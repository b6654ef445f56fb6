// runtime/precision.h — the precision a run computes in, decided once from what was asked (--bf16) and the
// device it runs on, then handed down: bf16 autocast on a GPU, fp32 elsewhere (graphed runs the CPU in fp32).
#pragma once

#include <string>

#include <c10/core/Device.h>

namespace graphed::runtime {

enum class Precision { kFloat32, kBFloat16Autocast };

/// bf16 autocast when it was asked for and the device is a GPU; fp32 otherwise.
Precision choose_precision(bool bf16_requested, const c10::Device& device);

/// Whether matmuls run under bf16 autocast (and the peak to measure MFU against is bf16's).
inline bool autocasts(Precision precision) { return precision == Precision::kBFloat16Autocast; }

/// "bf16 autocast" or "fp32", for the lines that describe a run.
std::string describe(Precision precision);

}  // namespace graphed::runtime
