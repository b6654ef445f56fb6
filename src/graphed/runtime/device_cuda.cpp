// runtime/device_cuda.cpp — runtime/device.h for CUDA builds. CPU devices fall back to the clock.
#include "graphed/runtime/device.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_profiler_api.h>
#include <torch/cuda.h>

#include <chrono>

#include "graphed/util/host_memory.h"

namespace graphed::runtime {

bool cuda_available() { return torch::cuda::is_available(); }
int64_t cuda_device_count() { return static_cast<int64_t>(torch::cuda::device_count()); }
std::optional<std::string> why_cuda_is_unavailable() {
  if (cuda_available()) return std::nullopt;
  return "no CUDA device is visible";
}

std::string device_name(const at::Device& device) {
  if (!device.is_cuda()) return "cpu";
  return at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index())->name;
}

void synchronize(const at::Device& device) {
  if (device.is_cuda()) c10::cuda::device_synchronize();
}

int64_t peak_memory_bytes(const at::Device& device) {
  if (!device.is_cuda()) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
  return stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
}

void reset_peak_memory(const at::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
}

bool on_default_stream(const at::Device& device) {
  if (!device.is_cuda()) return false;
  const c10::DeviceIndex index = device.index() < 0 ? 0 : device.index();
  return c10::cuda::getCurrentCUDAStream(index) == c10::cuda::getDefaultCUDAStream(index);
}

int64_t allocated_memory_bytes(const at::Device& device) {
  if (!device.is_cuda()) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
  return stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
}

int64_t reserved_memory_bytes(const at::Device& device) {
  if (!device.is_cuda()) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
  return stats.reserved_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
}

int64_t graph_pool_bytes(const at::Device& device) {
  if (!device.is_cuda()) return 0;
  const c10::DeviceIndex index = device.index() < 0 ? 0 : device.index();
  const auto snapshot = c10::cuda::CUDACachingAllocator::snapshot({0, 0}, /*include_traces=*/false);
  int64_t bytes = 0;
  for (const auto& segment : snapshot.segments) {
    const bool in_private_pool = segment.owner_private_pool_id.first != 0 || segment.owner_private_pool_id.second != 0;
    if (segment.device == index && in_private_pool) bytes += static_cast<int64_t>(segment.total_size);
  }
  return bytes;
}

int64_t device_memory_used_bytes(const at::Device& device) {
  if (!device.is_cuda()) return 0;
  const c10::cuda::CUDAGuard guard(device.index() < 0 ? 0 : device.index());
  std::size_t free = 0, total = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(total - free);
}

std::optional<int64_t> available_memory_bytes(const at::Device& device) {
  if (!device.is_cuda()) return host_available_memory_bytes();
  const c10::cuda::CUDAGuard guard(device.index() < 0 ? 0 : device.index());
  std::size_t free = 0, total = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(free);
}

void empty_cache(const at::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
}

struct DeviceTimer::Impl {
  bool cuda = false;
  at::cuda::CUDAEvent begin{cudaEventDefault};
  at::cuda::CUDAEvent end{cudaEventDefault};
  std::chrono::steady_clock::time_point wall_begin, wall_end;
};

DeviceTimer::DeviceTimer(const at::Device& device) : impl_(std::make_unique<Impl>()) { impl_->cuda = device.is_cuda(); }
DeviceTimer::~DeviceTimer() = default;

void DeviceTimer::start() {
  if (impl_->cuda)
    impl_->begin.record(at::cuda::getCurrentCUDAStream());
  else
    impl_->wall_begin = std::chrono::steady_clock::now();
}

void DeviceTimer::stop() {
  if (impl_->cuda)
    impl_->end.record(at::cuda::getCurrentCUDAStream());
  else
    impl_->wall_end = std::chrono::steady_clock::now();
}

double DeviceTimer::elapsed_ms() {
  if (!impl_->cuda) return std::chrono::duration<double, std::milli>(impl_->wall_end - impl_->wall_begin).count();
  impl_->end.synchronize();
  return impl_->begin.elapsed_time(impl_->end);
}

struct StreamEvent::Impl {
  bool cuda = false;
  at::cuda::CUDAEvent event{cudaEventDisableTiming};
};

StreamEvent::StreamEvent(const at::Device& device) : impl_(std::make_unique<Impl>()) { impl_->cuda = device.is_cuda(); }
StreamEvent::~StreamEvent() = default;

void StreamEvent::record() {
  if (impl_->cuda) impl_->event.record(at::cuda::getCurrentCUDAStream());
}

void StreamEvent::wait() {
  if (impl_->cuda && impl_->event.isCreated()) impl_->event.synchronize();
}

at::Tensor pinned_host_tensor(at::IntArrayRef sizes, at::ScalarType dtype, const at::Device& device) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype).pinned_memory(device.is_cuda()));
}

ProfilerRange::ProfilerRange(const at::Device& device) : cuda_(device.is_cuda()) {
  if (cuda_) C10_CUDA_CHECK(cudaProfilerStart());
}

ProfilerRange::~ProfilerRange() {
  if (cuda_) (void)cudaProfilerStop();  // a destructor must not throw; a failed stop only ends profiling late
}

}  // namespace graphed::runtime
