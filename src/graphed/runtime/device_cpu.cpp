// runtime/device_cpu.cpp — runtime/device.h for builds without CUDA (GRAPHED_CUDA=0).
#include "graphed/runtime/device.h"

#include <chrono>

#include "graphed/util/host_memory.h"

namespace graphed::runtime {

bool cuda_available() { return false; }
int64_t cuda_device_count() { return 0; }
std::optional<std::string> why_cuda_is_unavailable() {
  return "this binary was built against a CPU-only LibTorch (GRAPHED_CUDA=0)";
}
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

}  // namespace graphed::runtime
