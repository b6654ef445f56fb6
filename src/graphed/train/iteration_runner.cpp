// train/iteration_runner.cpp — the eager runner and the one place that picks a runner per impl.
#include "graphed/train/iteration_runner.h"

#include "graphed/capture/graph_support.h"
#include "graphed/train/expert_blocks_runner.h"
#include "graphed/train/full_iteration_runner.h"
#include "graphed/train/local_graph_runner.h"
#include "graphed/train/transformer_engine_runner.h"
#include "graphed/util/error.h"

namespace graphed::train {
namespace {

/// --cuda-graph-impl none: every iteration and evaluation runs eagerly on the current stream.
class EagerIterationRunner final : public IterationRunner {
 public:
  explicit EagerIterationRunner(TrainingStep& step) : step_(step) {}
  IterationStats train(const std::vector<Batch>& host_batches) override {
    return step_.run_iteration(step_.to_device(host_batches), /*with_optimizer=*/true);
  }
  at::Tensor evaluate(const std::vector<Batch>& host_batches) override {
    return step_.evaluation_loss(step_.to_device(host_batches));
  }

 private:
  TrainingStep& step_;
};

}  // namespace

std::unique_ptr<IterationRunner> make_iteration_runner(TrainingStep& step) {
  const config::CudaGraphImpl impl = step.config().cuda_graph.impl;
  if (impl == config::CudaGraphImpl::kNone) return std::make_unique<EagerIterationRunner>(step);
  if (const auto why_not = capture::why_graphs_cannot_run(step.device())) {
    throw ConfigError("--cuda-graph-impl " + config::to_string(impl) + " needs CUDA graphs, but " + *why_not +
                      "; fix: --cuda-graph-impl none, or train on a GPU");
  }
  switch (impl) {
    case config::CudaGraphImpl::kFullIteration:
      // Fixed expert blocks: the overflow check and its rerun come between the graph and the optimizer step.
      if (step.checks_expert_overflow()) return std::make_unique<ExpertBlocksRunner>(step);
      return std::make_unique<FullIterationRunner>(step);
    case config::CudaGraphImpl::kTransformerEngine: return std::make_unique<TransformerEngineRunner>(step);
    case config::CudaGraphImpl::kLocal: return std::make_unique<LocalGraphRunner>(step);
    case config::CudaGraphImpl::kNone: break;
  }
  return std::make_unique<EagerIterationRunner>(step);
}

}  // namespace graphed::train
