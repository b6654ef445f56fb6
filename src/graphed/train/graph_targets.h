// train/graph_targets.h — which units of a GPT model the per-layer implementations (local and
// transformer_engine) graph, in forward order, and how each is routed through a runner: the
// first-stage unit (embedding), each layer's units that --cuda-graph-modules selects, and the
// last-stage unit (final norm, output layer, loss). The stage units are on unless the configuration
// turns them off (cuda_graph_stage_units).
#pragma once

#include <memory>
#include <vector>

#include "graphed/capture/unit_runner.h"
#include "graphed/config/cuda_graph_config.h"
#include "graphed/model/gpt_model.h"

namespace graphed::train {

/// The units one layer graphs, in forward order. No modules: the whole layer. Otherwise each selected
/// part is its own graph: attn -> attention; mamba -> the Mamba part (norm, mixer, residual: on a
/// hybrid M layer the whole layer, as Megatron graphs a MambaLayer); on a dense MLP mlp -> MLP; on an
/// MoE MLP moe -> the whole MoE MLP (drop-and-pad), moe_router -> router (+ shared expert),
/// moe_preprocess -> dispatch preprocessing. Parts a layer lacks are skipped, so a layer may graph
/// nothing (TE's _layer_is_graphable). The config layer has already checked the pairings (TC-9 … TC-14,
/// G2, G4).
std::vector<model::LayerUnit> graphed_layer_units(const config::CudaGraphConfig& config,
                                                  const model::LayerParts& parts);

enum class TargetKind { kEmbedding, kLayer, kLoss };

/// One unit to graph.
struct GraphTarget {
  TargetKind kind = TargetKind::kLayer;
  /// 0-based layer of a kLayer target; -1 for the embedding, the layer count for the loss.
  int64_t layer = 0;
  model::LayerUnit layer_unit = model::LayerUnit::kWholeLayer;  ///< kLayer only
  capture::GraphableUnit unit;
  model::LayerParts parts;  ///< kLayer only: what its layer holds (which unit opens and which closes it)
};

/// Every unit to graph, in forward order.
std::vector<GraphTarget> graph_targets(model::GptModel& model, const config::CudaGraphConfig& config);
/// The targets of each pipeline chunk (a rank's model chunks; one whole-model range without pipeline
/// parallelism), in forward order: the embedding on a first stage, the chunk's layers, the loss on a
/// last stage.
std::vector<std::vector<GraphTarget>> chunk_targets(const std::vector<GraphTarget>& targets,
                                                    const std::vector<model::LayerRange>& chunks);
/// The whole model as one chunk.
std::vector<model::LayerRange> whole_model(const model::GptModel& model);
/// Routes the target's unit through the runner, or puts the model's eager runner back.
void install_runner(model::GptModel& model, const GraphTarget& target, std::shared_ptr<capture::UnitRunner> runner);
void install_eager_runner(model::GptModel& model, const GraphTarget& target);

/// Per target: whether its argument 0 is, in every call, the previous target's output 0
/// (make_graphed_callables' chained_inputs): the embedding feeding the first layer's opening unit,
/// a mixer (attention, Mamba) feeding the MLP, MoE or router of its layer, a layer-closing unit (whole
/// layer, MLP, MoE, or a mixer on a layer without feed-forward part) feeding the next layer's opening
/// unit (whole layer, mixer, or the feed-forward unit of a layer without mixer) or the loss. Router
/// outputs, preprocessing plans and eagerly finished layers break the chain.
std::vector<bool> chained_targets(const std::vector<GraphTarget>& targets);
/// chained_targets over each chunk's targets, concatenated: a chunk's first unit takes its input from
/// another stage, so it is never chained.
std::vector<bool> chained_targets(const std::vector<std::vector<GraphTarget>>& chunks);

}  // namespace graphed::train
