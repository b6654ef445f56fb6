// train/layer_graph_helper.cpp — see train/layer_graph_helper.h.
#include "graphed/train/layer_graph_helper.h"

#include <chrono>
#include <cmath>

#include "graphed/capture/device.h"
#include "graphed/capture/make_graphed_callables.h"
#include "graphed/capture/schedule_order.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"

namespace graphed::train {
namespace {

using config::CudaGraphModule;
using model::LayerUnit;

/// Runs a unit eagerly and keeps a detached copy of the arguments of its first call.
class RecordingRunner final : public capture::UnitRunner {
 public:
  explicit RecordingRunner(capture::GraphableUnit unit) : unit_(std::move(unit)) {}
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    if (recorded_.empty()) {
      for (const at::Tensor& t : inputs) recorded_.push_back(t.detach().clone().requires_grad_(t.requires_grad()));
    }
    return unit_.forward(inputs);
  }
  const capture::GraphableUnit& unit() const override { return unit_; }
  const std::vector<at::Tensor>& recorded() const { return recorded_; }

 private:
  capture::GraphableUnit unit_;
  std::vector<at::Tensor> recorded_;
};

}  // namespace

std::vector<bool> chained_layer_units(const std::vector<std::pair<int64_t, LayerUnit>>& units) {
  std::vector<bool> chained(units.size(), false);
  for (std::size_t u = 1; u < units.size(); ++u) {
    const auto [layer, unit] = units[u];
    const auto [previous_layer, previous] = units[u - 1];
    const bool within = layer == previous_layer && previous == LayerUnit::kAttention &&
                        (unit == LayerUnit::kMlp || unit == LayerUnit::kMoe || unit == LayerUnit::kMoeRouter);
    const bool across = layer == previous_layer + 1 &&
                        (previous == LayerUnit::kWholeLayer || previous == LayerUnit::kMlp || previous == LayerUnit::kMoe) &&
                        (unit == LayerUnit::kWholeLayer || unit == LayerUnit::kAttention);
    chained[u] = within || across;
  }
  return chained;
}

std::vector<LayerUnit> graphed_layer_units(const config::CudaGraphConfig& config, bool is_moe_layer) {
  if (config.modules.empty()) return {LayerUnit::kWholeLayer};
  std::vector<LayerUnit> units;
  if (config.has_module(CudaGraphModule::kAttn)) units.push_back(LayerUnit::kAttention);
  if (!is_moe_layer) {
    if (config.has_module(CudaGraphModule::kMlp)) units.push_back(LayerUnit::kMlp);
    return units;
  }
  if (config.has_module(CudaGraphModule::kMoe)) units.push_back(LayerUnit::kMoe);
  if (config.has_module(CudaGraphModule::kMoeRouter)) units.push_back(LayerUnit::kMoeRouter);
  if (config.has_module(CudaGraphModule::kMoePreprocess)) units.push_back(LayerUnit::kMoePreprocess);
  return units;
}

LayerGraphHelper::LayerGraphHelper(model::GptModel model, config::CudaGraphConfig config, LayerGraphOptions options)
    : model_(std::move(model)), config_(std::move(config)), options_(options) {
  GRAPHED_INTERNAL_ASSERT(options_.captured_microbatches >= 1, "captured microbatches ", options_.captured_microbatches);
  int64_t index = 0;
  for (auto& layer : model_->layers()) {
    for (const LayerUnit unit : graphed_layer_units(config_, layer->is_moe())) targets_.push_back({layer, unit, index});
    ++index;
  }
  unit_count_ = static_cast<int64_t>(targets_.size());
}

LayerGraphHelper::~LayerGraphHelper() = default;

void LayerGraphHelper::install_eager_runners() {
  for (Target& target : targets_) target.layer->use_eager_runner(target.unit);
}

int64_t LayerGraphHelper::graph_count() const {
  int64_t graphs = 0;
  for (const auto& callable : callables_) graphs += callable->state().has_backward ? 2 : 1;
  return graphs;
}

void LayerGraphHelper::capture(const std::function<void()>& forward_once, const at::Device& device) {
  GRAPHED_INTERNAL_ASSERT(!is_captured(), "capture() twice without reset()");
  if (targets_.empty()) return;  // no layer has a graphable unit: stays eager (TE warns likewise)
  const auto start = std::chrono::steady_clock::now();
  capture::synchronize(device);
  capture::empty_cache(device);
  const int64_t reserved_before = capture::reserved_memory_bytes(device);
  // The recording forward, warmup and capture must not shift the random stream of training.
  const auto random_states = capture::rng_states(device);
  try {
    // 1. Record each unit's real arguments (shapes, dtypes, requires-grad and plausible values).
    std::vector<std::shared_ptr<RecordingRunner>> recorders;
    for (Target& target : targets_) {
      recorders.push_back(std::make_shared<RecordingRunner>(target.layer->unit(target.unit)));
      target.layer->set_runner(target.unit, recorders.back());
    }
    forward_once();
    std::vector<capture::GraphableUnit> units;
    for (const auto& recorder : recorders) {
      GRAPHED_INTERNAL_ASSERT(!recorder->recorded().empty(), "unit ", recorder->unit().name, " did not run");
      units.push_back(recorder->unit());
    }
    // 2. The PP = 1 schedule over the captured microbatches; the same samples for every slot (the
    //    engine gives slots whose lifetimes overlap their own buffers).
    const int64_t slots = options_.captured_microbatches;
    capture::PipelineRank rank;
    rank.microbatches = slots;
    capture::GraphedCallablesOptions options;
    options.order = capture::convert_schedule_table_to_order(capture::warmup_microbatches(rank), 1,
                                                             capture::schedule_table(slots, 1, 1));
    options.reuse_buffers = true;
    options.allow_unused_input = true;
    options.accumulate_parameter_grads = true;  // the optimizer keeps every grad allocated, zeroed in place
    std::vector<std::pair<int64_t, LayerUnit>> kinds;
    for (const Target& target : targets_) kinds.emplace_back(target.layer_index, target.unit);
    options.chained_inputs = chained_layer_units(kinds);
    options.retain_backward_graph = options_.retain_backward_graph;
    options.mode = options_.mode;
    const double eager_passes = static_cast<double>(options_.warmup_steps * options_.runtime_microbatches);
    options.warmup_iterations =
        std::max<int64_t>(1, static_cast<int64_t>(std::ceil((10.0 - eager_passes) / static_cast<double>(slots))));
    std::vector<capture::UnitArguments> samples;
    for (int64_t slot = 0; slot < slots; ++slot) {
      for (const auto& recorder : recorders) samples.push_back({recorder->recorded(), {}});
    }
    recorders.clear();
    install_eager_runners();
    {
      compat::AutocastScope autocast(options_.autocast);
      callables_ = capture::make_graphed_callables(units, samples, options);
    }
  } catch (...) {
    callables_.clear();
    install_eager_runners();
    throw;
  }
  capture::restore_rng_states(device, {random_states.begin(), random_states.end()});
  // 3. Route every layer's unit to its slots.
  const auto count = static_cast<std::size_t>(unit_count_);
  for (std::size_t u = 0; u < count; ++u) {
    std::vector<std::shared_ptr<capture::GraphedCallable>> per_slot;
    for (std::size_t slot = 0; slot * count + u < callables_.size(); ++slot) per_slot.push_back(callables_[slot * count + u]);
    Target& target = targets_[u];
    target.layer->set_runner(target.unit, std::make_shared<capture::MicrobatchRunner>(target.layer->unit(target.unit),
                                                                                       std::move(per_slot), microbatch_));
  }
  capture::synchronize(device);
  pool_bytes_ = capture::reserved_memory_bytes(device) - reserved_before;
  capture_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void LayerGraphHelper::reset() {
  install_eager_runners();
  for (const auto& callable : callables_) callable->reset();
  callables_.clear();
  pool_bytes_ = 0;
}

}  // namespace graphed::train
