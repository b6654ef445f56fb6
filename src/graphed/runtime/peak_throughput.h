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

/// What the CPU estimate reads.
struct CpuFacts {
  std::string cpuinfo;            ///< /proc/cpuinfo's text
  int usable_cpus = 0;            ///< logical CPUs this process may run on (its affinity)
  std::string max_frequency_khz;  ///< cpufreq's cpuinfo_max_freq, empty where the machine has none
};

/// The CPU estimate, an upper bound: cores x clock x fp32 FLOP per cycle. Cores: the physical cores
/// (distinct physical and core ids; SMT threads share their core's FMA units), at most the usable CPUs.
/// Clock: the highest of cpufreq's maximum, the model name's "@ 2.60GHz" and cpuinfo's "cpu MHz". FLOP per
/// cycle: 64 with AVX-512 (two 512-bit FMA pipes; on AMD from Zen 5, family 26, on), 32 with AVX2 and FMA (two
/// 256-bit pipes, and AMD's AVX-512 before Zen 5), 16 otherwise.
/// nullopt when no clock is known.
std::optional<PeakThroughput> cpu_peak(const CpuFacts& facts);

}  // namespace graphed::runtime
