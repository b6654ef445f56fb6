// runtime/peak_throughput.cpp — see runtime/peak_throughput.h.
#include "graphed/runtime/peak_throughput.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>
#include <utility>

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

namespace {

/// The value after the colon of the first line that starts with `key`, or "".
std::string field(const std::string& cpuinfo, const std::string& key) {
  for (std::size_t at = 0; at < cpuinfo.size();) {
    const std::size_t end = std::min(cpuinfo.find('\n', at), cpuinfo.size());
    if (cpuinfo.compare(at, key.size(), key) == 0) {
      const std::size_t colon = cpuinfo.find(':', at);
      if (colon != std::string::npos && colon < end) return cpuinfo.substr(colon + 1, end - colon - 1);
    }
    at = end + 1;
  }
  return "";
}

/// The highest clock the facts name, in MHz (0: none).
double highest_megahertz(const CpuFacts& facts) {
  double megahertz = std::strtod(field(facts.cpuinfo, "cpu MHz").c_str(), nullptr);
  const std::string model = field(facts.cpuinfo, "model name");
  const std::size_t at = model.find('@');
  if (at != std::string::npos) {
    char* end = nullptr;
    const double ghz = std::strtod(model.c_str() + at + 1, &end);
    if (end != nullptr && std::string(end).find("GHz") != std::string::npos) megahertz = std::max(megahertz, ghz * 1e3);
  }
  return std::max(megahertz, std::strtod(facts.max_frequency_khz.c_str(), nullptr) / 1e3);
}

/// Distinct (physical id, core id) pairs: the physical cores; 0 when cpuinfo lists no core ids.
int physical_cores(const std::string& cpuinfo) {
  std::set<std::pair<std::string, std::string>> cores;
  std::string physical;
  for (std::size_t at = 0; at < cpuinfo.size();) {
    const std::size_t end = std::min(cpuinfo.find('\n', at), cpuinfo.size());
    const std::string line = cpuinfo.substr(at, end - at);
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos) {
      if (line.rfind("physical id", 0) == 0) physical = line.substr(colon + 1);
      if (line.rfind("core id", 0) == 0) cores.emplace(physical, line.substr(colon + 1));
    }
    at = end + 1;
  }
  return static_cast<int>(cores.size());
}

}  // namespace

std::optional<PeakThroughput> cpu_peak(const CpuFacts& facts) {
  const double megahertz = highest_megahertz(facts);
  const int listed = physical_cores(facts.cpuinfo);
  const int cores = listed > 0 ? std::min(listed, std::max(1, facts.usable_cpus)) : facts.usable_cpus;
  if (!(megahertz > 0.0) || cores < 1) return std::nullopt;
  const std::string flags = " " + field(facts.cpuinfo, "flags") + " ";
  const auto has = [&](const char* flag) { return flags.find(" " + std::string(flag) + " ") != std::string::npos; };
  // AMD runs AVX-512 on 256-bit pipes before Zen 5 (family 26): twice the instructions, not twice the FLOPs.
  const bool amd = field(facts.cpuinfo, "vendor_id").find("AuthenticAMD") != std::string::npos;
  const bool full_width =
      has("avx512f") && !(amd && std::strtol(field(facts.cpuinfo, "cpu family").c_str(), nullptr, 10) < 26);
  const int per_cycle = full_width ? 64 : has("avx2") && has("fma") ? 32 : 16;
  const double flops = static_cast<double>(cores) * megahertz * 1e6 * per_cycle;
  return PeakThroughput{flops, "CPU estimate: " + std::to_string(cores) + " cores x " + text_of(megahertz / 1000.0) +
                                   " GHz x " + std::to_string(per_cycle) + " fp32 FLOP/cycle"};
}

std::optional<PeakThroughput> peak_throughput(const c10::Device& device, bool low_precision) {
  if (!device.is_cuda()) {
    CpuFacts facts;
    if (read_file("/proc/cpuinfo", facts.cpuinfo) != 0) return std::nullopt;
    cpu_set_t usable;
    facts.usable_cpus = ::sched_getaffinity(0, sizeof(usable), &usable) == 0
                            ? CPU_COUNT(&usable)
                            : static_cast<int>(std::thread::hardware_concurrency());
    read_file("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", facts.max_frequency_khz);
    return cpu_peak(facts);
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
