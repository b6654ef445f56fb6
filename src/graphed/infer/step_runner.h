// infer/step_runner.h — how a decode step runs, chosen once per engine from the inference graph scope
// (Megatron's --inference-cuda-graph-scope, research §6.1): eagerly (none), as one CUDA graph per
// layer replayed in turn between an eager embedding and an eager head (layer: the local
// implementation's inline-capture path), or as one graph from the token ids through the sampled
// next tokens (block). Graph runners capture one graph set per bucket, all in one memory pool.
#pragma once

#include <cstdint>
#include <memory>

#include "graphed/capture/cuda_graph.h"
#include "graphed/config/cuda_graph_config.h"
#include "graphed/infer/decode_step.h"

namespace graphed::infer {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  /// Captures the graphs of this bucket's state (a no-op when eager). Runs the step eagerly first
  /// (the warmup), so the state's buffers and the cache hold junk afterwards: prefill before use.
  virtual void prepare(DecodeState& state) = 0;
  /// One decode step on the state (prepared first).
  virtual void step(DecodeState& state) = 0;
  /// Graphs captured so far.
  virtual int64_t graph_count() const = 0;
  /// Drops every graph; their pool memory goes back to the allocator.
  virtual void release() = 0;
};

/// The runner for a scope. Throws CaptureError for a graph scope in a build or on a device without
/// CUDA graphs.
std::unique_ptr<StepRunner> make_step_runner(config::InferenceCudaGraphScope scope, DecodeStep& decode,
                                             const at::Device& device);

}  // namespace graphed::infer
