// train/trainer.h — the training loop (DESIGN.md §7). One iteration, top to bottom: learning rate
// written to the device, microbatches loaded, forward/backward over all microbatches with losses
// accumulated on the device, sync-free grad-norm clipping folded into the fused AdamW step, NaN flag
// accumulated on the device. The host reads losses only at --log-interval. With --cuda-graph-impl
// full_iteration the same iteration (optionally without the optimizer step, --optimizer-cuda-graph) is a
// capture::FullIterationGraph over static batch buffers, and everything runs on one side stream.
// With --cuda-graph-impl transformer_engine the layers' units are captured ahead of time after
// --cuda-graph-warmup-steps steps (train/layer_graph_helper.h); evaluation stays eager.
#pragma once

#include <fstream>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/full_iteration_graph.h"
#include "graphed/capture/static_batch_buffer.h"
#include "graphed/config/run_config.h"
#include "graphed/model/gpt_model.h"
#include "graphed/train/adamw.h"
#include "graphed/train/layer_graph_helper.h"
#include "graphed/train/token_dataset.h"

namespace graphed::train {

/// Device scalars of one iteration; reading them synchronizes.
struct IterationStats {
  at::Tensor loss;       ///< mean LM loss over the microbatches
  at::Tensor aux_loss;   ///< mean MoE load-balancing loss
  at::Tensor grad_norm;  ///< global gradient norm before clipping
};

/// One log interval as printed and written to --metrics-file.
struct IntervalRecord {
  int64_t iteration = 0;  ///< 1-based, last iteration of the interval
  double learning_rate = 0, loss = 0, grad_norm = 0, ms_per_iteration = 0, tokens_per_second = 0, tflops = 0;
};

struct TrainSummary {
  int64_t last_iteration = 0;
  std::vector<IntervalRecord> intervals;
  std::vector<std::pair<int64_t, double>> validation_losses;  ///< (iteration, loss)
};

class Trainer {
 public:
  /// Builds the model (initialized from --seed on the CPU, then moved to the device) and the optimizer.
  Trainer(const config::RunConfig& config, TokenDataset data, const at::Device& device);

  /// Runs 0-based iteration `iteration` (eagerly, or through the full-iteration graph).
  IterationStats train_step(int64_t iteration);
  /// Forward and backward over the microbatches; returns {mean LM loss, mean aux loss} on the device.
  std::pair<at::Tensor, at::Tensor> forward_backward(const std::vector<Batch>& microbatches);
  /// Mean validation loss over --eval-iters iterations' worth of batches (round picks the batches).
  double evaluate(int64_t round);
  /// The loop from start_iteration() to --train-iters: logging, evaluation, checkpoints. Progress
  /// lines go to out; a TTY progress bar to stderr. Throws graphed::Error on NaN when the check is on.
  TrainSummary train(std::ostream& out);

  /// Loads --load; the loop then continues after the checkpoint's iteration.
  void load(const std::string& dir);
  /// Saves the state after `iterations` iterations under --save.
  std::string save(int64_t iterations);

  model::GptModel& model() { return model_; }
  AdamW& optimizer() { return *optimizer_; }
  const TokenDataset& data() const { return data_; }
  const at::Device& device() const { return device_; }
  int64_t start_iteration() const { return start_iteration_; }
  /// Model FLOPs of one iteration (forward + backward), Megatron's estimate.
  double flops_per_iteration() const;

  /// The full-iteration graphs and their static batches (null without --cuda-graph-impl full_iteration).
  const capture::FullIterationGraph* training_graph() const { return train_graph_.get(); }
  const capture::FullIterationGraph* evaluation_graph() const { return eval_graph_.get(); }
  const capture::StaticBatchBuffer& training_batch_buffer() const { return train_buffer_; }
  /// The per-layer graphs (null without --cuda-graph-impl transformer_engine).
  const LayerGraphHelper* layer_graphs() const { return layer_graphs_.get(); }
  /// Drops every graph (their pools return to the allocator); the next calls warm up and capture again.
  void delete_cuda_graphs();

 private:
  std::vector<Batch> host_batches(Split split, int64_t first_sample, int64_t microbatches) const;
  /// Zero grads, forward and backward over the batches, grad norm and (optionally) the optimizer step.
  IterationStats run_iteration(const std::vector<Batch>& batches, bool with_optimizer);
  void optimizer_step(const at::Tensor& grad_norm);
  at::Tensor evaluation_loss(const std::vector<Batch>& batches);
  std::vector<Batch> static_batches(const capture::StaticBatchBuffer& buffer) const;
  void write_metrics(const nlohmann::json& record);
  void capture_layer_graphs(const Batch& first_microbatch);

  config::RunConfig config_;
  TokenDataset data_;
  at::Device device_;
  model::GptModel model_{nullptr};
  std::unique_ptr<AdamW> optimizer_;
  int64_t start_iteration_ = 0;
  std::optional<std::ofstream> metrics_;
  // full_iteration only.
  std::unique_ptr<capture::SideStream> stream_;
  std::unique_ptr<capture::FullIterationGraph> train_graph_;
  std::unique_ptr<capture::FullIterationGraph> eval_graph_;
  capture::StaticBatchBuffer train_buffer_{"training batches"};
  capture::StaticBatchBuffer eval_buffer_{"validation batches"};
  // transformer_engine only.
  std::unique_ptr<LayerGraphHelper> layer_graphs_;
};

}  // namespace graphed::train
