// capture/full_iteration_graph.cpp — see capture/full_iteration_graph.h.
#include "graphed/capture/full_iteration_graph.h"

#include <chrono>

#include "graphed/capture/capture_memory.h"
#include "graphed/capture/capture_state.h"
#include "graphed/util/logging.h"

namespace graphed::capture {

FullIterationGraph::FullIterationGraph(FullIterationGraphOptions options, const at::Device& device, GraphPool pool)
    : options_(std::move(options)), device_(device), pool_(pool) {}

std::vector<at::Tensor> FullIterationGraph::run(const CudaGraph::Region& region) {
  if (graph_.is_captured()) {
    graph_.replay();
  } else if (calls_ >= options_.warmup_steps) {
    const MemoryMark before(device_);
    const auto start = std::chrono::steady_clock::now();
    outputs_ = graph_.capture(region, pool_, options_.mode, options_.name);
    capture_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    memory_ = before.taken_since();
    GRAPHED_DEBUG("capture", "captured " << options_.name << " in " << capture_seconds_ << " s, pool grew by "
                                         << memory_.pool_bytes << " bytes");
    graph_.replay();  // capturing executes nothing: this call's work is the first replay
  } else {
    WarmupScope warmup(WarmupKind::kOrdinaryIteration);
    outputs_ = region();
  }
  ++calls_;
  return outputs_;
}

void FullIterationGraph::reset(GraphPool pool) {
  graph_.reset();
  // LibTorch releases a shared pool when its last graph dies, and a released handle cannot be used
  // again: a graph captured after the reset gets a new pool (the caller's, or one of its own).
  if (pool.is_shared()) {
    pool_ = pool;
  } else if (pool_.is_shared()) {
    pool_ = GraphPool::create();
  }
  outputs_.clear();
  calls_ = 0;
  capture_seconds_ = 0;
  memory_ = {};
}

}  // namespace graphed::capture
