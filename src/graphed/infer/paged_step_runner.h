// infer/paged_step_runner.h — how a serving step runs, chosen once per engine from the inference graph
// scope (Megatron's --inference-cuda-graph-scope): eagerly (none), as one graph per layer keyed on the
// step's padded batch dimensions and sampling mode, replayed between an eager embedding and an eager
// head (layer), or as one graph from the token ids through the drawn tokens (block). Graphs of every
// key share one memory pool. The engine runs steps no graph serves through the eager runner.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "graphed/config/cuda_graph_config.h"
#include "graphed/infer/batch_buckets.h"
#include "graphed/infer/paged_step.h"

namespace graphed::infer {

/// What a step's graph is captured for.
struct StepKey {
  BatchDimensions dimensions;
  SamplingMode mode = SamplingMode::kGreedy;
  SamplingFeatures features;
  bool operator<(const StepKey& other) const;
  std::string describe() const;
};

class PagedStepRunner {
 public:
  virtual ~PagedStepRunner() = default;
  /// Whether the key's graphs exist.
  virtual bool has(const StepKey& key) const = 0;
  /// Captures the key's graphs over `views` (a warmup step runs eagerly first, so the views must hold
  /// a step that may run twice: padding only).
  virtual void capture(const StepKey& key, StepViews& views) = 0;
  /// Runs one step: replays the key's graphs (captured before), or runs eagerly. A masked key's step calls
  /// `before_sampling` once its model work is queued and before its sampling is (the host writes the step's masks
  /// there while the device runs the model); other keys take none.
  virtual void run(const StepKey& key, StepViews& views, const std::function<void()>& before_sampling = {}) = 0;
  virtual int64_t graph_count() const = 0;
  /// Drops every graph; their pool memory goes back to the allocator.
  virtual void release() = 0;
};

/// The runner for a scope. Throws CaptureError for a graph scope without CUDA graphs.
std::unique_ptr<PagedStepRunner> make_paged_step_runner(config::InferenceCudaGraphScope scope, PagedStep& step,
                                                        const at::Device& device);

}  // namespace graphed::infer
