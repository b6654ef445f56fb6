// capture/cuda_graph_cuda.cpp — capture/cuda_graph.h on CUDA LibTorch 2.x.
#include "graphed/capture/cuda_graph.h"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>

#include "graphed/capture/capture_diagnostics.h"
#include "graphed/capture/capture_state.h"
#include "graphed/capture/random_stream.h"
#include "graphed/util/compat.h"
#include "graphed/util/logging.h"

#if !GRAPHED_TORCH_AT_LEAST(2, 0)
#error "graphed's CUDA-graph code needs LibTorch 2.x (capture modes, generator registration)"
#endif

namespace graphed::capture {
namespace {

cudaStreamCaptureMode to_cuda(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::kGlobal: return cudaStreamCaptureModeGlobal;
    case CaptureMode::kThreadLocal: return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::kRelaxed: return cudaStreamCaptureModeRelaxed;
  }
  return cudaStreamCaptureModeThreadLocal;
}

}  // namespace

GraphPool GraphPool::create() {
  const auto handle = at::cuda::graph_pool_handle();
  GraphPool pool;
  pool.first_ = handle.first;
  pool.second_ = handle.second;
  return pool;
}

struct CudaGraph::Impl {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
};

CudaGraph::CudaGraph() : impl_(std::make_unique<Impl>()) {}
CudaGraph::~CudaGraph() = default;

std::vector<at::Tensor> CudaGraph::capture(const Region& region, const GraphPool& pool, CaptureMode mode,
                                           const std::string& what) {
  c10::cuda::device_synchronize();
  // As torch.cuda.graph does: return the warmup's cached blocks to the device first, so that the graph's
  // private pool does not come on top of them (the pool keeps its own high-water mark reserved).
  c10::cuda::CUDACachingAllocator::emptyCache();
  impl_->graph = std::make_unique<at::cuda::CUDAGraph>();
  std::vector<at::Tensor> outputs;
  {
    CaptureScope capturing;
    GRAPHED_DEBUG("capture", "capturing " << what);
    // Model-parallel random streams (capture/random_stream.h) advance on every replay, as the default does.
    for (RandomStream* stream : random_streams(at::Device(at::kCUDA))) {
      impl_->graph->register_generator_state(stream->generator());
    }
    impl_->graph->capture_begin({pool.first(), pool.second()}, to_cuda(mode));
    try {
      outputs = region();
    } catch (const std::exception& error) {
      const std::string text = error.what();
      try {
        impl_->graph->capture_end();
      } catch (const std::exception&) {  // the capture is already broken; its own error adds nothing
      }
      impl_->graph.reset();
      throw diagnose_capture_failure(what, text);
    }
    try {
      impl_->graph->capture_end();
    } catch (const std::exception& error) {
      impl_->graph.reset();
      throw diagnose_capture_failure(what, error.what());
    }
  }
  c10::cuda::device_synchronize();
  return outputs;
}

void CudaGraph::replay() { impl_->graph->replay(); }

void CudaGraph::launch_without_random_state() {
  C10_CUDA_CHECK(cudaGraphLaunch(impl_->graph->raw_cuda_graph_exec(), c10::cuda::getCurrentCUDAStream()));
}

void CudaGraph::reset() { impl_->graph.reset(); }

bool CudaGraph::is_captured() const { return static_cast<bool>(impl_->graph); }

struct SideStream::Impl {
  std::optional<c10::cuda::CUDAStream> stream;
};

SideStream::SideStream(const at::Device& device) : impl_(std::make_unique<Impl>()) {
  if (device.is_cuda()) impl_->stream = c10::cuda::getStreamFromPool(false, device.index() < 0 ? 0 : device.index());
}
SideStream::~SideStream() = default;

struct SideStream::Use::Impl {
  bool joined = true;
  std::optional<c10::cuda::CUDAStream> previous;
  std::optional<c10::cuda::CUDAStreamGuard> guard;
  std::optional<c10::cuda::CUDAStream> stream;
};

SideStream::Use::Use(SideStream& stream, Join join) : impl_(std::make_unique<Impl>()) {
  if (!stream.impl_->stream) return;
  impl_->stream = stream.impl_->stream;
  impl_->previous = c10::cuda::getCurrentCUDAStream(impl_->stream->device_index());
  impl_->joined = join == Join::kBoth;
  if (impl_->joined) {
    at::cuda::CUDAEvent ready;
    ready.record(*impl_->previous);
    ready.block(*impl_->stream);
  }
  impl_->guard.emplace(*impl_->stream);
}

SideStream::Use::~Use() {
  if (!impl_->stream) return;
  impl_->guard.reset();
  if (!impl_->joined) return;
  at::cuda::CUDAEvent done;
  done.record(*impl_->stream);
  done.block(*impl_->previous);
}

}  // namespace graphed::capture
