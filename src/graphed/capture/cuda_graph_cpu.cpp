// capture/cuda_graph_cpu.cpp — capture/cuda_graph.h for builds without CUDA (GRAPHED_CUDA=0):
// nothing can be captured; asking to is a clear error, everything else is a no-op.
#include "graphed/capture/cuda_graph.h"

#include "graphed/util/error.h"

namespace graphed::capture {

GraphPool GraphPool::create() { return GraphPool(); }

struct CudaGraph::Impl {};
CudaGraph::CudaGraph() = default;
CudaGraph::~CudaGraph() = default;

std::vector<at::Tensor> CudaGraph::capture(const Region&, const GraphPool&, CaptureMode, const std::string& what) {
  throw CaptureError("cannot capture " + what +
                         ": this binary was built against a CPU-only LibTorch "
                         "(GRAPHED_CUDA=0), which has no CUDA graphs",
                     "run it without CUDA graphs, or build on a GPU machine (scripts/gpu-check)");
}
void CudaGraph::replay() {}
void CudaGraph::launch_without_random_state() {}
void CudaGraph::reset() {}
bool CudaGraph::is_captured() const { return false; }

struct SideStream::Impl {};
SideStream::SideStream(const at::Device&) {}
SideStream::~SideStream() = default;
struct SideStream::Use::Impl {};
SideStream::Use::Use(SideStream&, Join) {}
SideStream::Use::~Use() = default;

}  // namespace graphed::capture
