// capture/full_iteration_graph.cpp — see capture/full_iteration_graph.h.
#include "graphed/capture/full_iteration_graph.h"

#include <algorithm>
#include <chrono>

#include "graphed/capture/capture_state.h"
#include "graphed/capture/device.h"
#include "graphed/util/logging.h"

namespace graphed::capture {

FullIterationGraph::FullIterationGraph(FullIterationGraphOptions options, const at::Device& device, GraphPool pool)
    : options_(std::move(options)), device_(device), pool_(pool) {}

std::vector<at::Tensor> FullIterationGraph::run(const CudaGraph::Region& region) {
  if (graph_.is_captured()) {
    graph_.replay();
  } else if (calls_ >= options_.warmup_steps) {
    const int64_t pools_before = graph_pool_bytes(device_);
    const int64_t reserved_before = reserved_memory_bytes(device_);
    const int64_t used_before = device_memory_used_bytes(device_);
    const auto start = std::chrono::steady_clock::now();
    outputs_ = graph_.capture(region, pool_, options_.mode, options_.name);
    capture_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    pool_bytes_ = graph_pool_bytes(device_) - pools_before;
    const int64_t reserved_change = reserved_memory_bytes(device_) - reserved_before;
    graph_bytes_ = std::max<int64_t>(0, device_memory_used_bytes(device_) - used_before - reserved_change);
    GRAPHED_DEBUG("capture", "captured " << options_.name << " in " << capture_seconds_ << " s, pool grew by "
                                         << pool_bytes_ << " bytes");
    graph_.replay();  // capturing executes nothing: this call's work is the first replay
  } else {
    WarmupScope warmup;
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
  pool_bytes_ = 0;
  graph_bytes_ = 0;
}

}  // namespace graphed::capture
