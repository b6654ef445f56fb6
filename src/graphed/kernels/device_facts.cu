// kernels/device_facts.cu — see kernels/detail/device_facts.h. A table by device ordinal, filled at a
// device's first question (the answers never change in a process).
#include "graphed/kernels/detail/device_facts.h"

#include <cuda_runtime.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace graphed::kernels::detail {
namespace {

struct Facts {
  int multiprocessors = 1;
  bool programmatic_launch = false;
};

constexpr int kMaxDevices = 64;

const Facts& facts_of_current_device() {
  static std::array<Facts, kMaxDevices> table;
  static std::array<std::once_flag, kMaxDevices> asked;
  int device = 0;
  cudaGetDevice(&device);
  if (device < 0 || device >= kMaxDevices) device = 0;
  std::call_once(asked[static_cast<std::size_t>(device)], [device] {
    Facts& facts = table[static_cast<std::size_t>(device)];
    int major = 0;
    cudaDeviceGetAttribute(&facts.multiprocessors, cudaDevAttrMultiProcessorCount, device);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    const char* setting = std::getenv("GRAPHED_PROGRAMMATIC_LAUNCH");
    const bool turned_off = setting != nullptr && std::strcmp(setting, "0") == 0;
    facts.programmatic_launch = major >= 9 && !turned_off;
  });
  return table[static_cast<std::size_t>(device)];
}

}  // namespace

int multiprocessor_count() { return facts_of_current_device().multiprocessors; }

bool programmatic_launch_supported() { return facts_of_current_device().programmatic_launch; }

}  // namespace graphed::kernels::detail
