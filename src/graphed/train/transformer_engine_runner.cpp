// train/transformer_engine_runner.cpp — see train/transformer_engine_runner.h.
#include "graphed/train/transformer_engine_runner.h"

#include "graphed/capture/device.h"
#include "graphed/util/compat.h"
#include "graphed/util/logging.h"

namespace graphed::train {
namespace {

/// One pool for the layers' graphs and the optimizer graph after them (--cuda-graph-use-single-mempool).
capture::GraphPool shared_pool(const config::CudaGraphConfig& graphs) {
  return graphs.use_single_mempool ? capture::GraphPool::create() : capture::GraphPool();
}

LayerGraphOptions layer_options(const TrainingStep& step, const capture::GraphPool& pool) {
  LayerGraphOptions options;
  options.runtime_microbatches = step.config().num_microbatches();
  options.warmup_steps = step.config().cuda_graph.warmup_steps;
  options.autocast = step.config().model.bf16 && step.device().is_cuda();
  options.retain_backward_graph = step.config().cuda_graph.retain_backward_graph;
  options.pool = pool;
  return options;
}

bool optimizer_graphed(const config::CudaGraphConfig& graphs) { return graphs.stage_units || graphs.optimizer_cuda_graph; }

}  // namespace

TransformerEngineRunner::TransformerEngineRunner(TrainingStep& step)
    : TransformerEngineRunner(step, shared_pool(step.config().cuda_graph)) {}

TransformerEngineRunner::TransformerEngineRunner(TrainingStep& step, const capture::GraphPool& pool)
    : step_(step),
      stream_(step.device()),
      layers_(step.model(), step.config().cuda_graph, layer_options(step, pool)),
      optimizer_(step, optimizer_graphed(step.config().cuda_graph), step.config().cuda_graph.warmup_steps, pool) {
  if (layers_.unit_count() == 0) {
    log_warn("cuda_graph_impl=transformer_engine: no layer has a unit that the module selection " +
             config::to_string(step.config().cuda_graph.modules) + " picks; the layers train eagerly");
  }
}

TransformerEngineRunner::~TransformerEngineRunner() = default;

IterationStats TransformerEngineRunner::train(const std::vector<Batch>& host_batches) {
  capture::SideStream::Use on_stream(stream_);
  const std::vector<Batch> batches = step_.to_device(host_batches);
  // The graphs are captured at the top of the first iteration after the warmup (as MCore does).
  if (!layers_.is_captured() && iterations_ >= step_.config().cuda_graph.warmup_steps) {
    step_.model()->train();
    layers_.capture(
        [&] {
          compat::AutocastScope autocast(step_.config().model.bf16 && step_.device().is_cuda());
          step_.model()->forward(batches.front().tokens, batches.front().labels, 0);
        },
        step_.device());
  }
  step_.model()->train();  // the grads were zeroed after the last optimizer step
  auto [loss, aux_loss] = step_.forward_backward(batches);
  const at::Tensor grad_norm = optimizer_.run();
  ++iterations_;
  return {loss, aux_loss, grad_norm};
}

at::Tensor TransformerEngineRunner::evaluate(const std::vector<Batch>& host_batches) {
  capture::SideStream::Use on_stream(stream_);
  return step_.evaluation_loss(step_.to_device(host_batches));
}

std::optional<CaptureReport> TransformerEngineRunner::capture_report() const {
  if (!layers_.is_captured() || (optimizer_.is_graphed() && !optimizer_.is_captured())) return std::nullopt;
  CaptureReport report;
  report.what = std::to_string(layers_.unit_count()) + " units (" + std::to_string(layers_.graph_count()) +
                " graphs) ahead of time with the transformer_engine impl" +
                (optimizer_.is_graphed() ? ", and the optimizer step" : "");
  report.seconds = layers_.capture_seconds() + optimizer_.capture_seconds();
  report.pool_bytes = layers_.pool_bytes() + optimizer_.pool_bytes();
  report.graph_bytes = layers_.graph_bytes() + optimizer_.graph_bytes();
  return report;
}

int64_t TransformerEngineRunner::graph_count() const {
  return layers_.graph_count() + (optimizer_.is_captured() ? 1 : 0);
}

void TransformerEngineRunner::delete_cuda_graphs() {
  const capture::GraphPool pool = shared_pool(step_.config().cuda_graph);
  layers_.reset(pool);
  optimizer_.reset(pool);
  iterations_ = step_.config().cuda_graph.warmup_steps;  // the kernels are warm: capture at the next iteration
  capture::synchronize(step_.device());
  capture::empty_cache(step_.device());
}

}  // namespace graphed::train
