// infer/step_runner.cpp — see infer/step_runner.h.
#include "graphed/infer/step_runner.h"

#include <map>
#include <vector>

#include "graphed/capture/graph_support.h"
#include "graphed/runtime/device.h"
#include "graphed/util/error.h"

namespace graphed::infer {
namespace {

class EagerStepRunner final : public StepRunner {
 public:
  explicit EagerStepRunner(DecodeStep& decode) : decode_(decode) {}
  void prepare(DecodeState& /*state*/) override {}
  void step(DecodeState& state) override { decode_.run(state); }
  int64_t graph_count() const override { return 0; }
  void release() override {}

 private:
  DecodeStep& decode_;
};

/// Scope layer: per bucket, one graph per layer. Layer i's graph reads layer i-1's static output, so
/// the chain replays with no copies; embedding and head stay eager around it.
class LayerGraphRunner final : public StepRunner {
 public:
  explicit LayerGraphRunner(DecodeStep& decode) : decode_(decode), pool_(capture::GraphPool::create()) {}

  void prepare(DecodeState& state) override {
    if (buckets_.count(state.rows) > 0) return;
    decode_.run(state);  // warmup: lazy initialisation happens outside the capture
    Bucket bucket;
    at::Tensor input = state.hidden;
    for (int64_t i = 0; i < decode_.layer_count(); ++i) {
      bucket.graphs.push_back(std::make_unique<capture::CudaGraph>());
      const auto region = [&, i, input] { return std::vector<at::Tensor>{decode_.layer(i, input, state)}; };
      input = bucket.graphs.back()->capture(
          region, pool_, capture::CaptureMode::kThreadLocal,
          "decode layer " + std::to_string(i) + " (batch " + std::to_string(state.rows) + ")")[0];
      bucket.outputs.push_back(input);
    }
    buckets_.emplace(state.rows, std::move(bucket));
  }

  void step(DecodeState& state) override {
    Bucket& bucket = buckets_.at(state.rows);
    decode_.begin(state);
    for (auto& graph : bucket.graphs) graph->launch_without_random_state();
    decode_.finish(bucket.outputs.back(), state);
  }

  int64_t graph_count() const override {
    int64_t count = 0;
    for (const auto& item : buckets_) count += static_cast<int64_t>(item.second.graphs.size());
    return count;
  }

  // A fresh pool for later captures: the old one's id must not be captured into again once every graph
  // that used it is gone (LibTorch's host allocator asserts on it).
  void release() override {
    buckets_.clear();
    pool_ = capture::GraphPool::create();
  }

 private:
  struct Bucket {
    std::vector<std::unique_ptr<capture::CudaGraph>> graphs;
    std::vector<at::Tensor> outputs;  // each layer's static output, kept alive for the next layer
  };
  DecodeStep& decode_;
  capture::GraphPool pool_;
  std::map<int64_t, Bucket> buckets_;
};

/// Scope block: per bucket, one graph for the whole step, sampling and state update included.
class BlockGraphRunner final : public StepRunner {
 public:
  explicit BlockGraphRunner(DecodeStep& decode) : decode_(decode), pool_(capture::GraphPool::create()) {}

  void prepare(DecodeState& state) override {
    if (graphs_.count(state.rows) > 0) return;
    decode_.run(state);  // warmup
    auto graph = std::make_unique<capture::CudaGraph>();
    const auto region = [&] {
      decode_.run(state);
      return std::vector<at::Tensor>{};
    };
    graph->capture(region, pool_, capture::CaptureMode::kThreadLocal,
                   "decode step (batch " + std::to_string(state.rows) + ")");
    graphs_.emplace(state.rows, std::move(graph));
  }

  void step(DecodeState& state) override { graphs_.at(state.rows)->launch_without_random_state(); }
  int64_t graph_count() const override { return static_cast<int64_t>(graphs_.size()); }
  void release() override {  // a fresh pool, as LayerGraphRunner::release says
    graphs_.clear();
    pool_ = capture::GraphPool::create();
  }

 private:
  DecodeStep& decode_;
  capture::GraphPool pool_;
  std::map<int64_t, std::unique_ptr<capture::CudaGraph>> graphs_;
};

}  // namespace

std::unique_ptr<StepRunner> make_step_runner(config::InferenceCudaGraphScope scope, DecodeStep& decode,
                                             const at::Device& device) {
  if (scope == config::InferenceCudaGraphScope::kNone) return std::make_unique<EagerStepRunner>(decode);
  if (const auto why_not = capture::why_graphs_cannot_run(device)) {
    throw CaptureError("decode graphs cannot run: " + *why_not, "decode without graphs here, or on a GPU");
  }
  if (scope == config::InferenceCudaGraphScope::kLayer) return std::make_unique<LayerGraphRunner>(decode);
  return std::make_unique<BlockGraphRunner>(decode);
}

}  // namespace graphed::infer
