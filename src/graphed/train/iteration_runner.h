// train/iteration_runner.h — how one training iteration and one evaluation run, chosen once per
// --cuda-graph-impl by make_iteration_runner(): EagerIterationRunner (none), FullIterationRunner
// (full_iteration; ExpertBlocksRunner under fixed expert blocks), TransformerEngineRunner (transformer_engine:
// per-layer graphs ahead of time) and LocalGraphRunner (local: Megatron's CudaGraphManager). Each owns its stream,
// static buffers, graphs, capture report and memory figures; the Trainer's step and evaluation never branch on the
// implementation.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graphed/capture/capture_memory.h"
#include "graphed/capture/cuda_graph.h"
#include "graphed/train/training_step.h"

namespace graphed::train {

/// What a runner captured, for the trainer's one-line report.
struct CaptureReport {
  std::string what;               ///< e.g. "12 units (24 graphs) with the local impl, and the optimizer step"
  double seconds = 0;             ///< recording of arguments, warmup passes and captures
  capture::CaptureMemory memory;  ///< graph-pool growth during the captures, and the graphs themselves
};

class IterationRunner {
 public:
  virtual ~IterationRunner() = default;
  /// One training iteration over the microbatches (host batches, pinned on CUDA): zero grads,
  /// forward and backward, gradient norm, clipped optimizer step. Returns device statistics.
  virtual IterationStats train(const std::vector<Batch>& host_batches) = 0;
  /// The mean validation LM loss over the batches (a device scalar).
  virtual at::Tensor evaluate(const std::vector<Batch>& host_batches) = 0;
  /// Set once the runner's graphs are captured; unset for eager training and before the capture.
  virtual std::optional<CaptureReport> capture_report() const { return std::nullopt; }
  /// Graphs held now (forward and backward graphs count separately).
  virtual int64_t graph_count() const { return 0; }
  /// Frees every graph and its pool; later iterations warm up (or record) and capture again.
  virtual void delete_cuda_graphs() {}
};

/// The pool every graph of a runner shares with cuda_graph_use_single_mempool; otherwise none (each
/// graph, or each engine, takes a pool of its own).
inline capture::GraphPool runner_pool(const config::CudaGraphConfig& graphs) {
  return graphs.use_single_mempool ? capture::GraphPool::create() : capture::GraphPool();
}

/// The runner for step.config().cuda_graph: impl none -> eager; the others need CUDA graphs (capture/graph_support.h; a
/// ConfigError otherwise). step: not owned; outlives the runner.
std::unique_ptr<IterationRunner> make_iteration_runner(TrainingStep& step);

}  // namespace graphed::train
