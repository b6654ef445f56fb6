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
                         static_cast<int>(mode), features.code()) <
         std::make_tuple(other.dimensions.token_count, other.dimensions.prefill_count, other.dimensions.decode_count,
                         static_cast<int>(other.mode), other.features.code());
}

std::string StepKey::describe() const {
  static const char* const kModes[] = {"greedy", "sampled", "top-k/top-p"};
  std::string text = dimensions.describe() + " " + kModes[static_cast<int>(mode)];
  if (features.logprobs) text += " +logprobs";
  if (features.controlled) text += " +controls";
  if (features.masked) text += " +masks";
  return text;
}

namespace {

class EagerRunner final : public PagedStepRunner {
 public:
  explicit EagerRunner(PagedStep& step) : step_(step) {}
  bool has(const StepKey&) const override { return true; }
  void capture(const StepKey&, StepViews&) override {}
  void run(const StepKey&, StepViews& views, const std::function<void()>& before_sampling) override {
    const at::Tensor logits = step_.forward(views);
    if (before_sampling) before_sampling();
    step_.sample(logits, views);
  }
  int64_t graph_count() const override { return 0; }
  void release() override {}

 private:
  PagedStep& step_;
};

/// Scope layer: per batch shape, one graph per layer; layer i's graph reads layer i-1's static output.
/// The head and sampling run eagerly after the layers, so the sampling mode and features do not key these graphs.
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

  void run(const StepKey& key, StepViews& views, const std::function<void()>& before_sampling) override {
    Graphs& graphs = keys_.at(layers_key(key));
    step_.begin(views);
    for (auto& graph : graphs.graphs) graph->launch_without_random_state();
    const at::Tensor logits = step_.logits(graphs.outputs.back(), views);
    if (before_sampling) before_sampling();
    step_.sample(logits, views);
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
  static StepKey layers_key(const StepKey& key) { return {key.dimensions, SamplingMode::kGreedy, {}}; }
  PagedStep& step_;
  capture::GraphPool pool_;
  std::map<StepKey, Graphs> keys_;
};

/// Scope block: per key, one graph for the whole step, sampling included; a masked key's step in two graphs, the
/// model's (to the logits, a static output) and the sampling's, so that the host writes the masks between them.
class BlockGraphRunner final : public PagedStepRunner {
 public:
  explicit BlockGraphRunner(PagedStep& step) : step_(step), pool_(capture::GraphPool::create()) {}

  bool has(const StepKey& key) const override { return graphs_.count(key) > 0; }

  void capture(const StepKey& key, StepViews& views) override {
    if (has(key)) return;
    step_.run(views);  // warmup
    Graphs graphs;
    graphs.model = std::make_unique<capture::CudaGraph>();
    const std::string name = "serving step " + key.describe();
    if (!key.features.masked) {
      const auto whole = [&] {
        step_.run(views);
        return std::vector<at::Tensor>{};
      };
      graphs.model->capture(whole, pool_, capture::CaptureMode::kThreadLocal, name);
      graphs_.emplace(key, std::move(graphs));
      return;
    }
    const auto model = [&] { return std::vector<at::Tensor>{step_.forward(views)}; };
    const at::Tensor logits = graphs.model->capture(model, pool_, capture::CaptureMode::kThreadLocal, name)[0];
    graphs.sampling = std::make_unique<capture::CudaGraph>();
    const auto sampling = [&] {
      step_.sample(logits, views);
      return std::vector<at::Tensor>{};
    };
    graphs.sampling->capture(sampling, pool_, capture::CaptureMode::kThreadLocal, name + " sampling");
    graphs_.emplace(key, std::move(graphs));
  }

  void run(const StepKey& key, StepViews&, const std::function<void()>& before_sampling) override {
    Graphs& graphs = graphs_.at(key);
    graphs.model->launch_without_random_state();
    if (!graphs.sampling) return;
    if (before_sampling) before_sampling();
    graphs.sampling->launch_without_random_state();
  }
  int64_t graph_count() const override {
    int64_t count = 0;
    for (const auto& item : graphs_) count += item.second.sampling ? 2 : 1;
    return count;
  }
  void release() override {
    graphs_.clear();
    pool_ = capture::GraphPool::create();
  }

 private:
  struct Graphs {
    std::unique_ptr<capture::CudaGraph> model;     ///< the whole step, or a masked step's model to the logits
    std::unique_ptr<capture::CudaGraph> sampling;  ///< a masked step's sampling; null otherwise
  };
  PagedStep& step_;
  capture::GraphPool pool_;
  std::map<StepKey, Graphs> graphs_;
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
