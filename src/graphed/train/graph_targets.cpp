// train/graph_targets.cpp — see train/graph_targets.h.
#include "graphed/train/graph_targets.h"

namespace graphed::train {
namespace {

using config::CudaGraphModule;
using model::LayerUnit;

bool is_mixer(LayerUnit unit) { return unit == LayerUnit::kAttention || unit == LayerUnit::kMamba; }

/// The target's output 0 is the hidden state the next layer (or the loss) starts from.
bool ends_hidden(const GraphTarget& target) {
  if (target.kind == TargetKind::kEmbedding) return true;
  if (target.kind == TargetKind::kLoss) return false;
  const LayerUnit unit = target.layer_unit;
  return unit == LayerUnit::kWholeLayer || unit == LayerUnit::kMlp || unit == LayerUnit::kMoe ||
         (is_mixer(unit) && target.parts.feed_forward == model::FeedForward::kNone);
}

/// The target's argument 0 is the hidden state its layer (or the loss) starts from.
bool starts_hidden(const GraphTarget& target) {
  if (target.kind == TargetKind::kEmbedding) return false;
  if (target.kind == TargetKind::kLoss) return true;
  const LayerUnit unit = target.layer_unit;
  const bool feed_forward = unit == LayerUnit::kMlp || unit == LayerUnit::kMoe || unit == LayerUnit::kMoeRouter;
  return unit == LayerUnit::kWholeLayer || is_mixer(unit) ||
         (feed_forward && target.parts.mixer == model::Mixer::kNone);
}

}  // namespace

std::vector<LayerUnit> graphed_layer_units(const config::CudaGraphConfig& config, const model::LayerParts& parts) {
  if (config.modules.empty()) return {LayerUnit::kWholeLayer};
  std::vector<LayerUnit> units;
  if (parts.mixer == model::Mixer::kAttention && config.has_module(CudaGraphModule::kAttn)) {
    units.push_back(LayerUnit::kAttention);
  }
  if (parts.mixer == model::Mixer::kMamba && config.has_module(CudaGraphModule::kMamba)) {
    units.push_back(LayerUnit::kMamba);
  }
  if (parts.feed_forward == model::FeedForward::kDense && config.has_module(CudaGraphModule::kMlp)) {
    units.push_back(LayerUnit::kMlp);
  }
  if (parts.feed_forward != model::FeedForward::kMoe) return units;
  if (config.has_module(CudaGraphModule::kMoe)) units.push_back(LayerUnit::kMoe);
  if (config.has_module(CudaGraphModule::kMoeRouter)) units.push_back(LayerUnit::kMoeRouter);
  if (config.has_module(CudaGraphModule::kMoePreprocess)) units.push_back(LayerUnit::kMoePreprocess);
  return units;
}

std::vector<GraphTarget> graph_targets(model::GptModel& model, const config::CudaGraphConfig& config) {
  std::vector<GraphTarget> targets;
  if (config.stage_units) {
    targets.push_back(
        {TargetKind::kEmbedding, -1, LayerUnit::kWholeLayer, model->stage_unit(model::StageUnit::kEmbedding), {}});
  }
  int64_t index = 0;
  for (auto& layer : model->layers()) {
    for (const LayerUnit unit : graphed_layer_units(config, layer->parts())) {
      targets.push_back({TargetKind::kLayer, index, unit, layer->unit(unit), layer->parts()});
    }
    ++index;
  }
  if (config.stage_units) {
    targets.push_back(
        {TargetKind::kLoss, index, LayerUnit::kWholeLayer, model->stage_unit(model::StageUnit::kLoss), {}});
  }
  return targets;
}

std::vector<std::vector<GraphTarget>> chunk_targets(const std::vector<GraphTarget>& targets,
                                                    const std::vector<model::LayerRange>& chunks) {
  std::vector<std::vector<GraphTarget>> result(chunks.size());
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const model::LayerRange& range = chunks[c];
    for (const GraphTarget& target : targets) {
      const bool mine = target.kind == TargetKind::kEmbedding ? range.first_stage
                        : target.kind == TargetKind::kLoss
                            ? range.last_stage
                            : target.layer >= range.first_layer && target.layer < range.end_layer;
      if (mine) result[c].push_back(target);
    }
  }
  return result;
}

std::vector<model::LayerRange> whole_model(const model::GptModel& model) {
  return {{0, model->config().num_layers, true, true}};
}

std::vector<bool> chained_targets(const std::vector<std::vector<GraphTarget>>& chunks) {
  std::vector<bool> chained;
  for (const auto& chunk : chunks) {
    std::vector<bool> part = chained_targets(chunk);
    if (!part.empty()) part.front() = false;
    chained.insert(chained.end(), part.begin(), part.end());
  }
  return chained;
}

void install_runner(model::GptModel& model, const GraphTarget& target, std::shared_ptr<capture::UnitRunner> runner) {
  switch (target.kind) {
    case TargetKind::kEmbedding: model->set_stage_runner(model::StageUnit::kEmbedding, std::move(runner)); return;
    case TargetKind::kLoss: model->set_stage_runner(model::StageUnit::kLoss, std::move(runner)); return;
    case TargetKind::kLayer:
      model->layers()[static_cast<std::size_t>(target.layer)]->set_runner(target.layer_unit, std::move(runner));
      return;
  }
}

void install_eager_runner(model::GptModel& model, const GraphTarget& target) {
  switch (target.kind) {
    case TargetKind::kEmbedding: model->use_eager_stage_runner(model::StageUnit::kEmbedding); return;
    case TargetKind::kLoss: model->use_eager_stage_runner(model::StageUnit::kLoss); return;
    case TargetKind::kLayer:
      model->layers()[static_cast<std::size_t>(target.layer)]->use_eager_runner(target.layer_unit);
      return;
  }
}

std::vector<bool> chained_targets(const std::vector<GraphTarget>& targets) {
  std::vector<bool> chained(targets.size(), false);
  for (std::size_t u = 1; u < targets.size(); ++u) {
    const GraphTarget& previous = targets[u - 1];
    const GraphTarget& current = targets[u];
    const bool within = current.kind == TargetKind::kLayer && previous.kind == TargetKind::kLayer &&
                        current.layer == previous.layer && is_mixer(previous.layer_unit) &&
                        (current.layer_unit == LayerUnit::kMlp || current.layer_unit == LayerUnit::kMoe ||
                         current.layer_unit == LayerUnit::kMoeRouter);
    const bool across = current.layer == previous.layer + 1 && ends_hidden(previous) && starts_hidden(current);
    chained[u] = within || across;
  }
  return chained;
}

}  // namespace graphed::train
