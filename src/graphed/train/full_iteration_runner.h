// train/full_iteration_runner.h — --cuda-graph-impl full_iteration (research §4, Megatron's
// FullCudaGraphWrapper): the whole iteration — zero grads, forward and backward over every
// microbatch, the gradient norm and, with --optimizer-cuda-graph, the clipped optimizer step — is one
// capture::FullIterationGraph over static batch buffers; evaluation has a graph of its own. Everything
// runs on one side stream, so that the accumulate-grad nodes of the eager warmup belong to the
// capturing stream.
#pragma once

#include <memory>

#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/full_iteration_graph.h"
#include "graphed/capture/static_batch_buffer.h"
#include "graphed/train/iteration_runner.h"

namespace graphed::train {

/// The microbatches a static buffer holds, as batches (views of its storage).
std::vector<Batch> batches_in(const capture::StaticBatchBuffer& buffer);
/// Copies host batches (pinned on CUDA) into the buffer, without blocking.
void fill_batches(capture::StaticBatchBuffer& buffer, const std::vector<Batch>& host_batches, const at::Device& device);

class FullIterationRunner final : public IterationRunner {
 public:
  /// step: not owned; outlives this. Needs a CUDA device.
  explicit FullIterationRunner(TrainingStep& step);
  ~FullIterationRunner() override;

  IterationStats train(const std::vector<Batch>& host_batches) override;
  at::Tensor evaluate(const std::vector<Batch>& host_batches) override;
  std::optional<CaptureReport> capture_report() const override;
  int64_t graph_count() const override;
  void delete_cuda_graphs() override;

  const capture::FullIterationGraph& training_graph() const { return *train_graph_; }
  const capture::FullIterationGraph& evaluation_graph() const { return *eval_graph_; }
  const capture::StaticBatchBuffer& training_batch_buffer() const { return train_buffer_; }

 private:
  TrainingStep& step_;
  capture::SideStream stream_;
  std::unique_ptr<capture::FullIterationGraph> train_graph_;
  std::unique_ptr<capture::FullIterationGraph> eval_graph_;
  capture::StaticBatchBuffer train_buffer_{"training batches"};
  capture::StaticBatchBuffer eval_buffer_{"validation batches"};
};

}  // namespace graphed::train
