// train/layer_graph_helper.h — the `transformer_engine` impl's driver, MCore's TECudaGraphHelper for
// graphed (research/megatron-cudagraphs.md §3). There is no TransformerEngine library in C++: this
// helper and capture/make_graphed_callables.h are the engine, with TE's semantics (no FP8 yet). It
// picks each layer's graphed units from --cuda-graph-modules, records their real inputs with one eager
// forward, builds sample arguments per captured microbatch with schedule-aware buffer reuse, captures
// every unit ahead of time into one pool and routes the layers' UnitRunners to the graphs; the
// microbatch index set before each forward selects the graph. Evaluation runs eagerly (as in TE).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/graphed_callable.h"
#include "graphed/config/cuda_graph_config.h"
#include "graphed/model/gpt_model.h"

namespace graphed::train {

/// The units one layer graphs under --cuda-graph-impl transformer_engine, in forward order. No
/// modules: the whole layer. Otherwise each selected part is its own graph: attn -> attention; on a
/// dense layer mlp -> MLP; on an MoE layer moe -> the whole MoE MLP (drop-and-pad), moe_router ->
/// router (+ shared expert), moe_preprocess -> dispatch preprocessing. Parts a layer lacks are skipped,
/// so a layer may graph nothing (TE's _layer_is_graphable). The config layer has already checked the
/// pairings (TC-9 … TC-14, G2).
std::vector<model::LayerUnit> graphed_layer_units(const config::CudaGraphConfig& config, bool is_moe_layer);

/// For units in forward order, given as (layer index, unit): whether each unit's input is the previous
/// unit's output 0 in every call (make_graphed_callables' chained_inputs): attention feeding the MLP,
/// MoE or router of its layer, and a layer-ending unit (whole layer, MLP, MoE) feeding the next layer's
/// whole-layer or attention unit. Router outputs, preprocessing plans and eagerly finished layers break
/// the chain.
std::vector<bool> chained_layer_units(const std::vector<std::pair<int64_t, model::LayerUnit>>& units);

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
};

class LayerGraphHelper {
 public:
  LayerGraphHelper(model::GptModel model, config::CudaGraphConfig config, LayerGraphOptions options);
  ~LayerGraphHelper();

  /// Records every graphed unit's inputs by calling forward_once (one eager training forward of one
  /// microbatch, outputs discarded), captures, and installs the graphs. On failure the layers stay eager
  /// and the CaptureError propagates (after a failed capture the CUDA RNG is unusable: stop the run).
  void capture(const std::function<void()>& forward_once, const at::Device& device);
  /// The microbatch the next forward belongs to (Megatron's current_microbatch).
  void set_microbatch(int64_t microbatch) { *microbatch_ = microbatch; }
  /// Destroys every graph and puts the eager runners back; capture() may run again.
  void reset();

  bool is_captured() const { return !callables_.empty(); }
  /// Graphed units over all layers, and graphs (forward + backward) over all slots.
  int64_t unit_count() const { return unit_count_; }
  int64_t graph_count() const;
  double capture_seconds() const { return capture_seconds_; }
  /// Device memory the capture reserved, in bytes.
  int64_t pool_bytes() const { return pool_bytes_; }
  /// Every (unit, microbatch) callable, unit-major within the single chunk: microbatch x units + unit.
  const std::vector<std::shared_ptr<capture::GraphedCallable>>& callables() const { return callables_; }

 private:
  struct Target {
    model::TransformerLayer layer;
    model::LayerUnit unit;
    int64_t layer_index = 0;
  };
  void install_eager_runners();

  model::GptModel model_;
  config::CudaGraphConfig config_;
  LayerGraphOptions options_;
  std::vector<Target> targets_;
  std::shared_ptr<int64_t> microbatch_ = std::make_shared<int64_t>(0);
  std::vector<std::shared_ptr<capture::GraphedCallable>> callables_;
  int64_t unit_count_ = 0;
  double capture_seconds_ = 0;
  int64_t pool_bytes_ = 0;
};

}  // namespace graphed::train
