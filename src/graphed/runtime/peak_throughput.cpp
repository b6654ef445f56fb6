// runtime/peak_throughput.cpp — see runtime/peak_throughput.h.
#include "graphed/runtime/peak_throughput.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "graphed/runtime/device.h"
#include "graphed/util/file_system.h"

namespace graphed::runtime {
namespace {

struct GpuPeak {
  const char* name_part;
  double bf16_tflops, fp32_tflops;  // dense, SXM where there are several forms
  double terabytes_per_second;      // memory bandwidth
};

// Published dense peaks and memory bandwidths (NVIDIA data sheets); the first entry whose name is in
// the device's name wins.
const GpuPeak kGpuPeaks[] = {
    {"H200", 989.4, 66.9, 4.8},   {"H100 PCIe", 756.0, 51.2, 2.0}, {"H100", 989.4, 66.9, 3.35},
    {"A100", 312.0, 19.5, 2.039}, {"L40S", 362.1, 91.6, 0.864},    {"A10G", 70.0, 31.2, 0.6},
};

std::string text_of(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.3g", value);
  return buffer;
}

}  // namespace

std::optional<PeakThroughput> cpu_peak_from_cpuinfo(const std::string& cpuinfo, int cores) {
  const std::size_t at = cpuinfo.find("cpu MHz");
  if (at == std::string::npos || cores < 1) return std::nullopt;
  const std::size_t colon = cpuinfo.find(':', at);
  if (colon == std::string::npos) return std::nullopt;
  const double megahertz = std::strtod(cpuinfo.c_str() + colon + 1, nullptr);
  if (!(megahertz > 0.0)) return std::nullopt;
  const bool wide = cpuinfo.find(" avx2") != std::string::npos && cpuinfo.find(" fma") != std::string::npos;
  const int per_cycle = wide ? 32 : 16;
  const double flops = static_cast<double>(cores) * megahertz * 1e6 * per_cycle;
  return PeakThroughput{flops, "CPU estimate: " + std::to_string(cores) + " cores x " + text_of(megahertz / 1000.0) +
                                   " GHz x " + std::to_string(per_cycle) + " fp32 FLOP/cycle"};
}

std::optional<PeakThroughput> peak_throughput(const c10::Device& device, bool low_precision) {
  if (!device.is_cuda()) {
    std::string cpuinfo;
    if (read_file("/proc/cpuinfo", cpuinfo) != 0) return std::nullopt;
    return cpu_peak_from_cpuinfo(cpuinfo, static_cast<int>(std::thread::hardware_concurrency()));
  }
  const std::string name = device_name(device);
  for (const GpuPeak& peak : kGpuPeaks) {
    if (name.find(peak.name_part) == std::string::npos) continue;
    const double tflops = low_precision ? peak.bf16_tflops : peak.fp32_tflops;
    return PeakThroughput{tflops * 1e12, name + ", " + (low_precision ? "bf16" : "fp32") + " dense (published " +
                                             text_of(tflops) + " TFLOP/s)"};
  }
  return std::nullopt;
}

std::optional<PeakBandwidth> peak_memory_bandwidth(const c10::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  const std::string name = device_name(device);
  for (const GpuPeak& peak : kGpuPeaks) {
    if (name.find(peak.name_part) == std::string::npos) continue;
    return PeakBandwidth{peak.terabytes_per_second * 1e12,
                         name + ", memory bandwidth (published " + text_of(peak.terabytes_per_second) + " TB/s)"};
  }
  return std::nullopt;
}

}  // namespace graphed::runtime
