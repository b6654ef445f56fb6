// runtime/device.h — the few device facts every layer above needs, with one CUDA implementation
// (device_cuda.cpp, built when GRAPHED_CUDA) and one CPU implementation (device_cpu.cpp): availability,
// synchronization, memory figures, pinned host memory, events, a timer and the profiler's range.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>

namespace graphed::runtime {

/// Whether this binary has CUDA code and a CUDA device is visible.
bool cuda_available();
/// CUDA devices this process sees (0 without CUDA).
int64_t cuda_device_count();
/// Why no CUDA device can be used ("this binary was built against a CPU-only LibTorch (GRAPHED_CUDA=0)",
/// "no CUDA device is visible"); nullopt when one can.
std::optional<std::string> why_cuda_is_unavailable();
/// A one-line description of the device ("NVIDIA H200" or "cpu").
std::string device_name(const at::Device& device);
/// Waits for all work queued on the device (a no-op on the CPU).
void synchronize(const at::Device& device);
/// Peak bytes allocated through the caching allocator since the last reset (0 on the CPU).
int64_t peak_memory_bytes(const at::Device& device);
/// Resets the peak counter.
void reset_peak_memory(const at::Device& device);
/// Bytes currently allocated (in use) through the caching allocator (0 on the CPU).
int64_t allocated_memory_bytes(const at::Device& device);
/// Bytes the caching allocator holds from the device, in use or cached (0 on the CPU).
int64_t reserved_memory_bytes(const at::Device& device);
/// Bytes the caching allocator holds in private pools (the memory of every CUDA graph's pool), from
/// its segment snapshot (0 on the CPU).
int64_t graph_pool_bytes(const at::Device& device);
/// Bytes in use on the whole device (cudaMemGetInfo: total - free), the allocator's and everything
/// else's, such as instantiated graphs (0 on the CPU).
int64_t device_memory_used_bytes(const at::Device& device);
/// Bytes a run could still take: free device memory (cudaMemGetInfo) on a GPU, MemAvailable of
/// /proc/meminfo on the CPU; nullopt when unknown.
std::optional<int64_t> available_memory_bytes(const at::Device& device);
/// Returns cached, unused blocks to the device.
void empty_cache(const at::Device& device);
/// Whether the current stream of a CUDA device is its default (legacy) stream; false on the CPU.
bool on_default_stream(const at::Device& device);

/// A marker on the device's current stream that the host can wait for: reading a step's results one step
/// behind keeps the GPU busy. On the CPU everything has finished already and both calls return at once.
class StreamEvent {
 public:
  explicit StreamEvent(const at::Device& device);
  ~StreamEvent();
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  /// Marks the work queued so far on the current stream.
  void record();
  /// Blocks the host until the marked work has finished.
  void wait();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// An empty host tensor that a device copy can fill without blocking: page-locked on a CUDA device,
/// ordinary memory on the CPU.
at::Tensor pinned_host_tensor(at::IntArrayRef sizes, at::ScalarType dtype, const at::Device& device);

/// Times a region on the device's stream: CUDA events on the GPU, the wall clock on the CPU.
class DeviceTimer {
 public:
  explicit DeviceTimer(const at::Device& device);
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;
  void start();
  void stop();
  /// Milliseconds between start() and stop(); synchronizes on the stop event.
  double elapsed_ms();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The work between construction and destruction is what a profiler started with
/// `--profile-from-start off` (ncu) records: cudaProfilerStart/Stop on a CUDA device, nothing on the CPU.
class ProfilerRange {
 public:
  explicit ProfilerRange(const at::Device& device);
  ~ProfilerRange();
  ProfilerRange(const ProfilerRange&) = delete;
  ProfilerRange& operator=(const ProfilerRange&) = delete;

 private:
  bool cuda_ = false;
};

}  // namespace graphed::runtime
