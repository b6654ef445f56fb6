// infer/paged_step_runner.cpp — see infer/paged_step_runner.h.
#include "graphed/infer/paged_step_runner.h"

#include <map>
#include <tuple>
#include <vector>

#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/graph_support.h"
#include "graphed/runtime/device.h"
#include "graphed/util/error.h"

namespace graphed::infer {

bool StepKey::operator<(const StepKey& other) const {
  return std::make_tuple(dimensions.token_count, dimensions.prefill_count, dimensions.decode_count,
                         static_cast<int>(mode)) <
         std::make_tuple(other.dimensions.token_count, other.dimensions.prefill_count, other.dimensions.decode_count,
                         static_cast<int>(other.mode));
}

std::string StepKey::describe() const {
  static const char* const kModes[] = {"greedy", "sampled", "top-k/top-p"};
  return dimensions.describe() + " " + kModes[static_cast<int>(mode)];
}

namespace {

class EagerRunner final : public PagedStepRunner {
 public:
  explicit EagerRunner(PagedStep& step) : step_(step) {}
  bool has(const StepKey&) const override { return true; }
  void capture(const StepKey&, StepViews&) override {}
  void run(const StepKey&, StepViews& views) override { step_.run(views); }
  int64_t graph_count() const override { return 0; }
  void release() override {}

 private:
  PagedStep& step_;
};

/// Scope layer: per batch shape, one graph per layer; layer i's graph reads layer i-1's static output.
/// Sampling runs eagerly after the layers, so the sampling mode does not key these graphs.
class LayerGraphRunner final : public PagedStepRunner {
 public:
  explicit LayerGraphRunner(PagedStep& step) : step_(step), pool_(capture::GraphPool::create()) {}

  bool has(const StepKey& key) const override { return keys_.count(layers_key(key)) > 0; }

  void capture(const StepKey& key, StepViews& views) override {
    if (has(key)) return;
    step_.run(views);  // warmup: lazy initialisation happens outside the capture
    Graphs graphs;
    at::Tensor input = views.hidden;
    for (int64_t i = 0; i < step_.layer_count(); ++i) {
      graphs.graphs.push_back(std::make_unique<capture::CudaGraph>());
      const auto region = [&, i, input] { return std::vector<at::Tensor>{step_.layer(i, input, views)}; };
      input = graphs.graphs.back()->capture(region, pool_, capture::CaptureMode::kThreadLocal,
                                            "serving layer " + std::to_string(i) + " " + key.describe())[0];
      graphs.outputs.push_back(input);
    }
    keys_.emplace(layers_key(key), std::move(graphs));
  }

  void run(const StepKey& key, StepViews& views) override {
    Graphs& graphs = keys_.at(layers_key(key));
    step_.begin(views);
    for (auto& graph : graphs.graphs) graph->launch_without_random_state();
    step_.finish(graphs.outputs.back(), views);
  }

  int64_t graph_count() const override {
    int64_t count = 0;
    for (const auto& item : keys_) count += static_cast<int64_t>(item.second.graphs.size());
    return count;
  }

  // A fresh pool for later captures (LibTorch asserts on capturing into a pool whose graphs are gone).
  void release() override {
    keys_.clear();
    pool_ = capture::GraphPool::create();
  }

 private:
  struct Graphs {
    std::vector<std::unique_ptr<capture::CudaGraph>> graphs;
    std::vector<at::Tensor> outputs;
  };
  static StepKey layers_key(const StepKey& key) { return {key.dimensions, SamplingMode::kGreedy}; }
  PagedStep& step_;
  capture::GraphPool pool_;
  std::map<StepKey, Graphs> keys_;
};

/// Scope block: per key, one graph for the whole step, sampling included.
class BlockGraphRunner final : public PagedStepRunner {
 public:
  explicit BlockGraphRunner(PagedStep& step) : step_(step), pool_(capture::GraphPool::create()) {}

  bool has(const StepKey& key) const override { return graphs_.count(key) > 0; }

  void capture(const StepKey& key, StepViews& views) override {
    if (has(key)) return;
    step_.run(views);  // warmup
    auto graph = std::make_unique<capture::CudaGraph>();
    const auto region = [&] {
      step_.run(views);
      return std::vector<at::Tensor>{};
    };
    graph->capture(region, pool_, capture::CaptureMode::kThreadLocal, "serving step " + key.describe());
    graphs_.emplace(key, std::move(graph));
  }

  void run(const StepKey& key, StepViews&) override { graphs_.at(key)->launch_without_random_state(); }
  int64_t graph_count() const override { return static_cast<int64_t>(graphs_.size()); }
  void release() override {
    graphs_.clear();
    pool_ = capture::GraphPool::create();
  }

 private:
  PagedStep& step_;
  capture::GraphPool pool_;
  std::map<StepKey, std::unique_ptr<capture::CudaGraph>> graphs_;
};

}  // namespace

std::unique_ptr<PagedStepRunner> make_paged_step_runner(config::InferenceCudaGraphScope scope, PagedStep& step,
                                                        const at::Device& device) {
  if (scope == config::InferenceCudaGraphScope::kNone) return std::make_unique<EagerRunner>(step);
  if (const auto why_not = capture::why_graphs_cannot_run(device)) {
    throw CaptureError("serving graphs cannot run: " + *why_not, "serve without graphs here, or on a GPU");
  }
  if (scope == config::InferenceCudaGraphScope::kLayer) return std::make_unique<LayerGraphRunner>(step);
  return std::make_unique<BlockGraphRunner>(step);
}

}  // namespace graphed::infer
