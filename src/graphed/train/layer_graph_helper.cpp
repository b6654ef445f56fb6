// train/layer_graph_helper.cpp — see train/layer_graph_helper.h.
#include "graphed/train/layer_graph_helper.h"

#include <chrono>
#include <cmath>

#include "graphed/capture/capture_memory.h"
#include "graphed/capture/make_graphed_callables.h"
#include "graphed/capture/random_stream.h"
#include "graphed/capture/schedule_order.h"
#include "graphed/runtime/device.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"

namespace graphed::train {
namespace {

/// Runs a unit eagerly and keeps a detached copy of the arguments of its first call.
class RecordingRunner final : public capture::UnitRunner {
 public:
  explicit RecordingRunner(capture::GraphableUnit unit) : unit_(std::move(unit)) {}
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, int64_t /*microbatch*/) override {
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

LayerGraphHelper::LayerGraphHelper(model::GptModel model, const config::CudaGraphConfig& config,
                                   LayerGraphOptions options)
    : model_(std::move(model)), options_(options) {
  GRAPHED_INTERNAL_ASSERT(options_.captured_microbatches >= 1, "captured microbatches ",
                          options_.captured_microbatches);
  if (options_.chunks.empty()) options_.chunks = whole_model(model_);
  const auto chunks = chunk_targets(graph_targets(model_, config), options_.chunks);
  for (const auto& chunk : chunks) {
    units_per_chunk_.push_back(static_cast<int64_t>(chunk.size()));
    targets_.insert(targets_.end(), chunk.begin(), chunk.end());
  }
  chained_ = chained_targets(chunks);
}

LayerGraphHelper::~LayerGraphHelper() = default;

void LayerGraphHelper::install_eager_runners() {
  for (const GraphTarget& target : targets_) install_eager_runner(model_, target);
}

int64_t LayerGraphHelper::graph_count() const {
  int64_t graphs = 0;
  for (const auto& callable : callables_) graphs += callable->graph_count();
  return graphs;
}

capture::GraphedCallablesOptions LayerGraphHelper::callables_options() const {
  const int64_t slots = options_.captured_microbatches;
  capture::GraphedCallablesOptions options;
  options.order = options_.order;
  if (options.order.empty()) {
    capture::PipelineRank rank;
    rank.microbatches = slots;
    options.order = capture::convert_schedule_table_to_order(capture::warmup_microbatches(rank), 1,
                                                             capture::schedule_table(slots, 1, 1));
  }
  options.layers_per_chunk = units_per_chunk_;
  options.reuse_buffers = true;
  options.allow_unused_input = true;
  options.accumulate_parameter_grads = true;  // the optimizer keeps every grad allocated, zeroed in place
  options.clone_parameter_grads = false;      // so shared parameters' grads are added in place, not adopted
  options.chained_inputs = chained_;
  options.retain_backward_graph = options_.retain_backward_graph;
  options.mode = options_.mode;
  options.pool = options_.pool;
  const double eager_passes = static_cast<double>(options_.warmup_steps * options_.runtime_microbatches);
  options.warmup_iterations =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil((10.0 - eager_passes) / static_cast<double>(slots))));
  return options;
}

std::vector<capture::UnitArguments> LayerGraphHelper::slot_samples(
    const std::vector<std::vector<at::Tensor>>& recorded) const {
  std::vector<capture::UnitArguments> samples;
  int64_t first = 0;
  for (const int64_t units : units_per_chunk_) {
    for (int64_t slot = 0; slot < options_.captured_microbatches; ++slot) {
      for (int64_t u = first; u < first + units; ++u) samples.push_back({recorded[static_cast<std::size_t>(u)], {}});
    }
    first += units;
  }
  return samples;
}

void LayerGraphHelper::capture(const std::function<void()>& forward_once, const at::Device& device) {
  GRAPHED_INTERNAL_ASSERT(!is_captured(), "capture() twice without reset()");
  if (targets_.empty()) return;  // no unit to graph: stays eager (TE warns likewise)
  const auto start = std::chrono::steady_clock::now();
  runtime::synchronize(device);
  runtime::empty_cache(device);
  const capture::MemoryMark before(device);
  // The recording forward, warmup and capture must not shift the random stream of training.
  const capture::RandomStateSnapshot random_states(device);  // the model-parallel stream's too
  try {
    // 1. Record each unit's real arguments (shapes, dtypes, requires-grad and plausible values).
    std::vector<std::shared_ptr<RecordingRunner>> recorders;
    for (const GraphTarget& target : targets_) {
      recorders.push_back(std::make_shared<RecordingRunner>(target.unit));
      install_runner(model_, target, recorders.back());
    }
    forward_once();
    std::vector<capture::GraphableUnit> units;
    for (const auto& recorder : recorders) {
      GRAPHED_INTERNAL_ASSERT(!recorder->recorded().empty(), "unit ", recorder->unit().name, " did not run");
      units.push_back(recorder->unit());
    }
    // 2. The schedule over the captured microbatches (PP = 1, or the pipeline's order); the same
    //    samples for every slot (the engine gives slots whose lifetimes overlap their own buffers).
    const capture::GraphedCallablesOptions options = callables_options();
    std::vector<std::vector<at::Tensor>> recorded;
    for (const auto& recorder : recorders) recorded.push_back(recorder->recorded());
    const std::vector<capture::UnitArguments> samples = slot_samples(recorded);
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
  random_states.restore();
  // 3. Route every unit to its slots: entry prefix x M + microbatch x units + unit of its chunk.
  const int64_t slots = options_.captured_microbatches;
  int64_t first = 0;
  for (const int64_t units : units_per_chunk_) {
    for (int64_t u = 0; u < units; ++u) {
      std::vector<std::shared_ptr<capture::GraphedCallable>> per_slot;
      for (int64_t slot = 0; slot < slots; ++slot) {
        per_slot.push_back(callables_[static_cast<std::size_t>(first * slots + slot * units + u)]);
      }
      const GraphTarget& target = targets_[static_cast<std::size_t>(first + u)];
      install_runner(model_, target, std::make_shared<capture::MicrobatchRunner>(target.unit, std::move(per_slot)));
    }
    first += units;
  }
  runtime::synchronize(device);
  memory_ = before.taken_since();
  capture_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void LayerGraphHelper::reset(capture::GraphPool pool) {
  install_eager_runners();
  for (const auto& callable : callables_) callable->reset();
  callables_.clear();
  options_.pool = pool;
  memory_ = {};
}

}  // namespace graphed::train
