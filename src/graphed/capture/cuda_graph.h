// capture/cuda_graph.h — one captured CUDA graph, its memory pool, and the side stream graphs are
// captured and replayed on. Wraps at::cuda::CUDAGraph behind a pimpl so that this header builds
// without CUDA; on a CPU build (GRAPHED_CUDA=0) capturing throws a CaptureError that says so.
// Captures diagnose their failures (capture/capture_diagnostics.h). Model-agnostic.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/runtime/device.h"

namespace graphed::capture {

/// cudaStreamCaptureMode: whose unsafe CUDA calls a capture rejects (any thread's, this thread's, none).
enum class CaptureMode { kGlobal, kThreadLocal, kRelaxed };

/// A private memory pool of the caching allocator. Graphs sharing one must replay in capture order
/// and never concurrently. A default-constructed pool means "a fresh pool for each graph".
class GraphPool {
 public:
  GraphPool() = default;
  /// A new shared pool (at::cuda::graph_pool_handle()).
  static GraphPool create();
  bool is_shared() const { return first_ != 0 || second_ != 0; }
  uint64_t first() const { return first_; }
  uint64_t second() const { return second_; }

 private:
  uint64_t first_ = 0;
  uint64_t second_ = 0;
};

class CudaGraph {
 public:
  using Region = std::function<std::vector<at::Tensor>()>;
  CudaGraph();
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  /// Captures the region on the current stream (not the default stream) into the pool and returns
  /// its outputs: static tensors that every replay refreshes. The default CUDA generator is registered
  /// with the graph, so dropout draws new masks on every replay. Synchronizes the device before and
  /// after, and empties the allocator's cache before capturing (as torch.cuda.graph does). Throws CaptureError with the
  /// diagnosed cause and fix when the capture fails; `what` names the region in that message.
  std::vector<at::Tensor> capture(const Region& region, const GraphPool& pool, CaptureMode mode,
                                  const std::string& what);
  /// Launches the graph on the current stream.
  void replay();
  /// Launches it without LibTorch's per-replay generator update (two fill kernels per registered
  /// generator). Only for graphs whose work draws no random numbers: their generator increment is 0,
  /// so that update changes nothing.
  void launch_without_random_state();
  /// Destroys the graph; its pool memory returns to the allocator once no graph uses the pool.
  void reset();
  bool is_captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A dedicated stream on the device. While a Use is alive the stream is current; by default it first waits
/// for the stream that was current, and that stream waits for it at the end, so ordering with surrounding
/// work is kept. Training with graphs runs everything on one such stream, so that autograd's
/// accumulate-grad nodes of the eager warmup belong to the capturing stream. No-op on the CPU.
class SideStream {
 public:
  /// How a Use orders the side stream's work with the stream that was current.
  enum class Join {
    kBoth,  ///< the side stream waits for the current one's work first, and the current one for it at the end
    /// Neither waits: the side stream's work overlaps whatever the other streams hold, and the caller orders it
    /// by events of its own (a serving group's step headers, which must not wait for the step running).
    kNone
  };

  explicit SideStream(const at::Device& device);
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  class Use {
   public:
    explicit Use(SideStream& stream, Join join = Join::kBoth);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
  };

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A capture needs a stream other than the device's default one: while alive, a private SideStream is
/// current if the default stream was; otherwise nothing changes.
class OffDefaultStream {
 public:
  explicit OffDefaultStream(const at::Device& device) {
    if (!runtime::on_default_stream(device)) return;
    stream_.emplace(device);
    use_.emplace(*stream_);
  }

 private:
  std::optional<SideStream> stream_;
  std::optional<SideStream::Use> use_;  ///< declared last: ends before the stream goes
};

}  // namespace graphed::capture
