// runtime/peak_throughput.h — the device's peak dense FLOP/s, the denominator of MFU (model FLOPs
// utilization). GPUs from a table of published figures; the CPU from its core count, clock and vector
// width (an estimate, and said to be one).
#pragma once

#include <optional>
#include <string>

#include <c10/core/Device.h>

namespace graphed::runtime {

struct PeakThroughput {
  double flops_per_second = 0;
  std::string basis;  ///< how it was found: "NVIDIA H200, bf16 dense (published)"
};

/// The peak for matmuls in bf16 (low_precision) or fp32; nullopt for an unknown GPU.
std::optional<PeakThroughput> peak_throughput(const c10::Device& device, bool low_precision);

struct PeakBandwidth {
  double bytes_per_second = 0;
  std::string basis;  ///< "NVIDIA H200, HBM3e (published 4.8 TB/s)"
};

/// The GPU's published memory bandwidth (the decode roofline's denominator); nullopt on the CPU or for
/// an unknown GPU.
std::optional<PeakBandwidth> peak_memory_bandwidth(const c10::Device& device);

/// The CPU estimate from /proc/cpuinfo text: cores x clock x 32 fp32 FLOP per cycle with FMA and AVX2
/// (two 256-bit FMA pipes), 16 with AVX only; nullopt when the clock is not listed.
std::optional<PeakThroughput> cpu_peak_from_cpuinfo(const std::string& cpuinfo, int cores);

}  // namespace graphed::runtime
