// train/layer_graph_helper.h — the `transformer_engine` impl's driver, MCore's TECudaGraphHelper for
// graphed (research/megatron-cudagraphs.md §3). There is no TransformerEngine library in C++: this
// helper and capture/make_graphed_callables.h are the engine, with TE's semantics (no FP8 yet). It
// takes the units to graph from train/graph_targets.h, records their real inputs with one eager
// forward, builds sample arguments per captured microbatch with schedule-aware buffer reuse, captures
// every unit ahead of time into one pool and routes the units to the graphs; each call's microbatch
// picks its slot. Evaluation runs eagerly (as in TE).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "graphed/capture/capture_memory.h"
#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/graphed_callable.h"
#include "graphed/capture/make_graphed_callables.h"
#include "graphed/config/cuda_graph_config.h"
#include "graphed/model/gpt_model.h"
#include "graphed/train/graph_targets.h"

namespace graphed::train {

struct LayerGraphOptions {
  /// Graph sets per unit. Megatron captures one when the pipeline has a single stage (PP = 1, as here)
  /// and replays it for every microbatch; more capture one per microbatch slot, walking the
  /// PP = 1 schedule (forward, backward, forward, ...) with buffer reuse.
  int64_t captured_microbatches = 1;
  /// Microbatches per step and eager steps run before the capture (--cuda-graph-warmup-steps): the
  /// warmup count is Megatron's max(1, ceil((10 - warmup_steps x microbatches) / captured)).
  int64_t runtime_microbatches = 1;
  int64_t warmup_steps = 3;
  /// bf16 autocast around warmup and capture (as the training forward runs).
  bool autocast = false;
  bool retain_backward_graph = false;
  capture::CaptureMode mode = capture::CaptureMode::kGlobal;
  /// The rank's model chunks under pipeline parallelism (units grouped per chunk, chunk-major); empty:
  /// the whole model as one chunk.
  std::vector<model::LayerRange> chunks;
  /// The pipeline order over captured_microbatches (+c forward, -c backward of chunk c, 1-based), which
  /// warmup and capture walk; empty: the PP = 1 order.
  std::vector<int64_t> order;
  /// The pool every graph shares (with graphs that replay after them, such as the optimizer step);
  /// default: a new one per capture.
  capture::GraphPool pool;
};

class LayerGraphHelper {
 public:
  LayerGraphHelper(model::GptModel model, const config::CudaGraphConfig& config, LayerGraphOptions options);
  ~LayerGraphHelper();

  /// Records every graphed unit's inputs by calling forward_once (one eager training forward of one
  /// microbatch, outputs discarded), captures, and installs the graphs. On failure the units stay eager
  /// and the CaptureError propagates (after a failed capture the CUDA RNG is unusable: stop the run).
  void capture(const std::function<void()>& forward_once, const at::Device& device);
  /// Destroys every graph and puts the eager runners back; capture() may run again, into `pool`.
  void reset(capture::GraphPool pool = capture::GraphPool());

  bool is_captured() const { return !callables_.empty(); }
  /// Graphed units (stage units included), and graphs (forward + backward) over all slots.
  int64_t unit_count() const { return static_cast<int64_t>(targets_.size()); }
  int64_t graph_count() const;
  double capture_seconds() const { return capture_seconds_; }
  /// Device memory the capture took: the pool's growth, and the graphs outside the allocator.
  const capture::CaptureMemory& capture_memory() const { return memory_; }
  /// Every (unit, microbatch) callable, chunk-major, then microbatch, then unit within the chunk.
  const std::vector<std::shared_ptr<capture::GraphedCallable>>& callables() const { return callables_; }

 private:
  void install_eager_runners();
  /// make_graphed_callables' options: the order, chunks, buffer reuse, in-graph accumulation, warmups.
  capture::GraphedCallablesOptions callables_options() const;
  /// The sample arguments chunk by chunk, then slot, then unit: each unit's recorded arguments.
  std::vector<capture::UnitArguments> slot_samples(const std::vector<std::vector<at::Tensor>>& recorded) const;

  model::GptModel model_;
  LayerGraphOptions options_;
  std::vector<GraphTarget> targets_;  ///< chunk by chunk
  std::vector<int64_t> units_per_chunk_;
  std::vector<bool> chained_;
  std::vector<std::shared_ptr<capture::GraphedCallable>> callables_;
  double capture_seconds_ = 0;
  capture::CaptureMemory memory_;
};

}  // namespace graphed::train
