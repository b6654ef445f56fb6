// capture/device_cpu.cpp — capture/device.h for builds without CUDA (GRAPHED_CUDA=0).
#include "graphed/capture/device.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>

#include "graphed/util/host_memory.h"

namespace graphed::capture {

bool cuda_available() { return false; }
int64_t cuda_device_count() { return 0; }
std::string device_name(const at::Device&) { return "cpu"; }
void synchronize(const at::Device&) {}
int64_t peak_memory_bytes(const at::Device&) { return 0; }
void reset_peak_memory(const at::Device&) {}
int64_t allocated_memory_bytes(const at::Device&) { return 0; }
int64_t reserved_memory_bytes(const at::Device&) { return 0; }
int64_t device_memory_used_bytes(const at::Device&) { return 0; }
int64_t graph_pool_bytes(const at::Device&) { return 0; }
std::optional<int64_t> available_memory_bytes(const at::Device&) { return host_available_memory_bytes(); }
void empty_cache(const at::Device&) {}
bool on_default_stream(const at::Device&) { return false; }
uint64_t cuda_random_offset(const at::Device&) { return 0; }

std::vector<std::pair<std::string, at::Tensor>> rng_states(const at::Device&) {
  return {{"cpu", at::detail::getDefaultCPUGenerator().get_state()}};
}

void restore_rng_states(const at::Device&, const std::map<std::string, at::Tensor>& states) {
  const auto cpu = states.find("cpu");
  if (cpu != states.end()) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(cpu->second);
  }
}

struct DeviceTimer::Impl {
  std::chrono::steady_clock::time_point begin, end;
};
DeviceTimer::DeviceTimer(const at::Device&) : impl_(std::make_unique<Impl>()) {}
DeviceTimer::~DeviceTimer() = default;
void DeviceTimer::start() { impl_->begin = std::chrono::steady_clock::now(); }
void DeviceTimer::stop() { impl_->end = std::chrono::steady_clock::now(); }
double DeviceTimer::elapsed_ms() {
  return std::chrono::duration<double, std::milli>(impl_->end - impl_->begin).count();
}

struct StreamEvent::Impl {};
StreamEvent::StreamEvent(const at::Device&) : impl_(std::make_unique<Impl>()) {}
StreamEvent::~StreamEvent() = default;
void StreamEvent::record() {}
void StreamEvent::wait() {}

at::Tensor pinned_host_tensor(at::IntArrayRef sizes, at::ScalarType dtype, const at::Device&) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype));
}

ProfilerRange::ProfilerRange(const at::Device&) {}
ProfilerRange::~ProfilerRange() = default;

}  // namespace graphed::capture
