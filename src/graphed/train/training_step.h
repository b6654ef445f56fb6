// train/training_step.h — the pieces every iteration runner is made of, run eagerly: batches to the
// device, forward and backward over the microbatches with the losses accumulated on the device, the
// gradient norm, the clipped optimizer step and the evaluation loss. An IterationRunner
// (train/iteration_runner.h) runs them as they are, or captures them into graphs; they never branch
// on the implementation.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "graphed/capture/random_stream.h"
#include "graphed/config/run_config.h"
#include "graphed/model/gpt_model.h"
#include "graphed/runtime/precision.h"
#include "graphed/train/adamw.h"
#include "graphed/train/gradient_sync.h"
#include "graphed/train/token_dataset.h"

namespace graphed::dist {
class ProcessGroups;
}

namespace graphed::train {

class PipelineSchedule;
class ExpertOverflowCheck;

/// Device scalars of one iteration; reading them synchronizes.
/// Whether an iteration may run its forward and backward again after an expert block overflowed (expert parallelism
/// with --moe-expert-rank-capacity-factor): the rerun reads the working copies after a backward has run.
bool reruns_on_expert_overflow(const config::RunConfig& config, const dist::ProcessGroups* groups);

struct IterationStats {
  at::Tensor loss;       ///< mean LM loss over the microbatches
  at::Tensor aux_loss;   ///< mean MoE load-balancing loss
  at::Tensor grad_norm;  ///< global gradient norm before clipping
};

class TrainingStep {
 public:
  /// model, optimizer, sync, groups: not owned; the trainer owns them and outlives this. groups: set
  /// when the run has several ranks; with pipeline stages, forward and backward follow the pipeline
  /// schedule (train/pipeline_schedule.h) over this rank's chunks.
  TrainingStep(const config::RunConfig& config, model::GptModel model, AdamW& optimizer, GradientSync& sync,
               const at::Device& device, runtime::Precision precision, dist::ProcessGroups* groups = nullptr);
  ~TrainingStep();

  const config::RunConfig& config() const { return config_; }
  model::GptModel& model() { return model_; }
  AdamW& optimizer() { return optimizer_; }
  const at::Device& device() const { return device_; }
  /// The precision of every forward of the run (runtime/precision.h), as the trainer chose it.
  runtime::Precision precision() const { return precision_; }

  /// Host batches (pinned on CUDA) to the device without blocking the host.
  std::vector<Batch> to_device(const std::vector<Batch>& host_batches) const;
  /// The model's forward of one microbatch (index `microbatch` of the iteration), in the run's precision.
  model::GptOutput forward(const Batch& batch, int64_t microbatch);
  /// One pipeline stage's forward (model::GptModelImpl::forward_chunk), under the same autocast.
  model::ChunkOutput forward_chunk(const model::LayerRange& range, const at::Tensor& input, const at::Tensor& labels,
                                   int64_t microbatch);
  /// The pipeline schedule when the model is split into stages, else null.
  PipelineSchedule* pipeline() const { return pipeline_.get(); }
  /// Forward and backward over the microbatches (microbatch m is forward pass m); returns {mean LM
  /// loss, mean aux loss} on the device, over every rank. Gradients accumulate into the optimizer's
  /// buffers and leave as the mean over the data-parallel ranks.
  std::pair<at::Tensor, at::Tensor> forward_backward(const std::vector<Batch>& microbatches);
  /// forward_backward, then rerun_if_overflowed: the losses of the run the gradients come from. What the per-layer
  /// runners call (their graphs replay inside it; the check and any rerun run after the backward).
  std::pair<at::Tensor, at::Tensor> forward_backward_checked(const std::vector<Batch>& microbatches);
  /// Sync-free clipping folded into the AdamW step: every gradient is divided by
  /// max(1, grad_norm / --clip-grad) inside the optimizer.
  void optimizer_step(const at::Tensor& grad_norm);
  /// The global gradient norm before clipping, over every rank's gradients.
  at::Tensor gradient_norm() { return sync_.gradient_norm(optimizer_); }
  /// Zero grads, train mode, forward/backward (run again dropless where an expert block overflowed), gradient norm
  /// and (with_optimizer) the step. Eager: a graph of it would hold the overflow check's host read (a runner that
  /// graphs the iteration splits it at rerun_if_overflowed).
  IterationStats run_iteration(const std::vector<Batch>& batches, bool with_optimizer);
  /// Under --moe-expert-rank-capacity-factor with expert parallelism, the overflow check (its count of reruns);
  /// else null.
  const ExpertOverflowCheck* expert_overflow() const { return expert_overflow_.get(); }
  /// Whether a forward and backward must be followed by rerun_if_overflowed before the optimizer step.
  bool checks_expert_overflow() const { return expert_overflow_ != nullptr; }
  /// After a forward and backward of `batches` (eager or replayed from graphs) that began from the random state
  /// `before`: whether an expert block overflowed on any rank (every rank calls it; one host read). If one did,
  /// the gradients are zeroed and the same batches run again from `before`, every MoE dropless and every graphed
  /// unit eagerly (the graphs hold the fixed blocks), and the rerun's {LM loss, aux loss} come back. Nothing
  /// without the check or when nothing overflowed.
  std::optional<std::pair<at::Tensor, at::Tensor>> rerun_if_overflowed(const std::vector<Batch>& batches,
                                                                       const capture::RandomStateSnapshot& before);
  /// Mean LM loss over the batches in eval mode without grad (train mode restored).
  at::Tensor evaluation_loss(const std::vector<Batch>& batches);

 private:
  config::RunConfig config_;
  model::GptModel model_;
  AdamW& optimizer_;
  GradientSync& sync_;
  at::Device device_;
  runtime::Precision precision_;
  at::Tensor zero_aux_loss_;                    ///< the aux loss of dense models: one zero, not one per microbatch
  std::unique_ptr<PipelineSchedule> pipeline_;  ///< the one place pipeline parallelism is chosen
  /// With a rank capacity factor under expert parallelism: the check that reruns an overflowed iteration dropless.
  std::unique_ptr<ExpertOverflowCheck> expert_overflow_;
};

}  // namespace graphed::train
