// capture/full_iteration_graph.h — FullIterationGraph: Megatron's FullCudaGraphWrapper for any
// region (DESIGN.md §5, research §4). The first warmup_steps calls run the region eagerly, the next
// call captures it and replays it (capture itself executes nothing), every later call replays. The
// region reads only static inputs (a StaticBatchBuffer, device tensors such as the learning rate) and
// returns device tensors, which become the graph's static outputs. A trainer keeps one for training
// and one for evaluation, each with its own counter. No model code here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graphed/capture/capture_memory.h"
#include "graphed/capture/cuda_graph.h"

namespace graphed::capture {

struct FullIterationGraphOptions {
  /// Names the region in errors, e.g. "the full-iteration training step".
  std::string name = "the full iteration";
  /// Eager calls before the capture (--cuda-graph-warmup-steps); >= 1.
  int64_t warmup_steps = 3;
  /// Capture mode; thread-local as Megatron's full-iteration wrapper.
  CaptureMode mode = CaptureMode::kThreadLocal;
};

class FullIterationGraph {
 public:
  /// pool: shared with other graphs (--cuda-graph-use-single-mempool) or default (a private pool).
  FullIterationGraph(FullIterationGraphOptions options, const at::Device& device, GraphPool pool = GraphPool());

  /// Runs the region eagerly, captures it, or replays it, by call count; returns its outputs.
  /// Throws CaptureError when the capture fails.
  std::vector<at::Tensor> run(const CudaGraph::Region& region);
  /// Drops the graph and its outputs and restarts the count: the region is warmed up and captured again,
  /// into a new pool (LibTorch cannot reuse a pool whose graphs are all gone): `pool` when it is a
  /// shared one (the caller's new pool for several graphs), else one of its own.
  void reset(GraphPool pool = GraphPool());

  int64_t calls() const { return calls_; }
  bool is_captured() const { return graph_.is_captured(); }
  /// Seconds the capture took (0 before it).
  double capture_seconds() const { return capture_seconds_; }
  /// Device memory the capture took: the pool's growth, and the graph itself outside the allocator.
  const CaptureMemory& capture_memory() const { return memory_; }

 private:
  FullIterationGraphOptions options_;
  at::Device device_;
  GraphPool pool_;
  CudaGraph graph_;
  std::vector<at::Tensor> outputs_;
  int64_t calls_ = 0;
  double capture_seconds_ = 0;
  CaptureMemory memory_;
};

}  // namespace graphed::capture
