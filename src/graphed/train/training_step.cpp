// train/training_step.cpp — see train/training_step.h.
#include "graphed/train/training_step.h"

#include <ATen/core/grad_mode.h>

#include <optional>

#include "graphed/capture/capture_state.h"
#include "graphed/capture/random_stream.h"
#include "graphed/dist/process_groups.h"
#include "graphed/train/expert_overflow.h"
#include "graphed/train/pipeline_schedule.h"
#include "graphed/util/compat.h"

namespace graphed::train {

TrainingStep::TrainingStep(const config::RunConfig& config, model::GptModel model, AdamW& optimizer, GradientSync& sync,
                           const at::Device& device, runtime::Precision precision, dist::ProcessGroups* groups)
    : config_(config),
      model_(std::move(model)),
      optimizer_(optimizer),
      sync_(sync),
      device_(device),
      precision_(precision),
      zero_aux_loss_(at::zeros({}, at::TensorOptions().device(device).dtype(at::kFloat))) {
  if (groups != nullptr && groups->layout().is_pipelined())
    pipeline_ = std::make_unique<PipelineSchedule>(*this, *groups, sync);
  if (reruns_on_expert_overflow(config, groups))
    expert_overflow_ = std::make_unique<ExpertOverflowCheck>(groups->world(), device);
}

TrainingStep::~TrainingStep() = default;

bool reruns_on_expert_overflow(const config::RunConfig& config, const dist::ProcessGroups* groups) {
  return groups != nullptr && groups->layout().expert_size > 1 && config.model.moe_expert_rank_capacity_factor;
}

std::vector<Batch> TrainingStep::to_device(const std::vector<Batch>& host_batches) const {
  // Through pinned memory without blocking: a pageable copy would wait for the stream, serializing the
  // host with the GPU every iteration.
  if (!device_.is_cuda()) return host_batches;
  std::vector<Batch> batches;
  for (const Batch& b : host_batches) {
    batches.push_back({b.tokens.to(device_, /*non_blocking=*/true), b.labels.to(device_, /*non_blocking=*/true)});
  }
  return batches;
}

model::GptOutput TrainingStep::forward(const Batch& batch, int64_t microbatch) {
  compat::AutocastScope autocast(runtime::autocasts(precision_));
  return model_->forward(batch.tokens, batch.labels, microbatch);
}

model::ChunkOutput TrainingStep::forward_chunk(const model::LayerRange& range, const at::Tensor& input,
                                               const at::Tensor& labels, int64_t microbatch) {
  compat::AutocastScope autocast(runtime::autocasts(precision_));
  return model_->forward_chunk(range, input, labels, microbatch);
}

std::pair<at::Tensor, at::Tensor> TrainingStep::forward_backward(const std::vector<Batch>& microbatches) {
  if (pipeline_) {
    const auto [loss, aux_loss] = pipeline_->forward_backward(microbatches);
    return sync_.reduce_losses(loss, aux_loss);
  }
  const double scale = 1.0 / static_cast<double>(microbatches.size());
  at::Tensor loss_sum, aux_sum;
  for (std::size_t index = 0; index < microbatches.size(); ++index) {
    const model::GptOutput output = forward(microbatches[index], static_cast<int64_t>(index));
    // The losses are taken before the backward: with graphs they live in graph memory, which the
    // backward graphs may reuse.
    const at::Tensor lm = output.lm_loss.detach().to(at::kFloat);
    loss_sum = loss_sum.defined() ? loss_sum.add_(lm) : lm.clone();
    if (output.aux_loss.defined()) {
      const at::Tensor aux = output.aux_loss.detach().to(at::kFloat);
      aux_sum = aux_sum.defined() ? aux_sum.add_(aux) : aux.clone();
    }
    if (index + 1 == microbatches.size()) sync_.before_last_backward();
    (microbatches.size() > 1 ? output.loss * scale : output.loss).backward();
  }
  sync_.after_backward();
  if (microbatches.size() > 1) {
    loss_sum.mul_(scale);
    if (aux_sum.defined()) aux_sum.mul_(scale);
  }
  return sync_.reduce_losses(loss_sum, aux_sum.defined() ? aux_sum : zero_aux_loss_);
}

void TrainingStep::optimizer_step(const at::Tensor& grad_norm) {
  std::optional<at::Tensor> grad_scale;
  if (config_.train.clip_grad > 0.0) grad_scale = at::clamp_min((grad_norm + 1e-6) / config_.train.clip_grad, 1.0);
  optimizer_.step(grad_scale);
  sync_.after_step();
  model_->end_step();  // e.g. FP8 delayed scales from this step's amaxes, in the same place (graph or not)
}

std::pair<at::Tensor, at::Tensor> TrainingStep::forward_backward_checked(const std::vector<Batch>& microbatches) {
  std::optional<capture::RandomStateSnapshot> random_before;  // a rerun draws the same dropout masks
  if (expert_overflow_) random_before.emplace(device_);
  auto losses = forward_backward(microbatches);
  if (!random_before) return losses;
  if (auto rerun = rerun_if_overflowed(microbatches, *random_before)) return *rerun;
  return losses;
}

IterationStats TrainingStep::run_iteration(const std::vector<Batch>& batches, bool with_optimizer) {
  optimizer_.zero_grad();
  model_->train();
  model_->begin_iteration();
  sync_.before_forward();
  const auto [loss, aux_loss] = forward_backward_checked(batches);
  const at::Tensor grad_norm = gradient_norm();
  if (with_optimizer) optimizer_step(grad_norm);
  return {loss, aux_loss, grad_norm};
}

std::optional<std::pair<at::Tensor, at::Tensor>> TrainingStep::rerun_if_overflowed(
    const std::vector<Batch>& batches, const capture::RandomStateSnapshot& before) {
  if (!expert_overflow_ || !expert_overflow_->overflowed(model_)) return std::nullopt;
  // A block overflowed on some rank: the same iteration again, every MoE dropless, from the same gradients' start.
  expert_overflow_->count_rerun();
  capture::EagerScope eager;  // graphed units hold the fixed blocks: the rerun runs them as they are
  optimizer_.zero_grad();
  before.restore();
  model_->use_dropless_experts(true);
  auto losses = forward_backward(batches);
  model_->use_dropless_experts(false);
  return losses;
}

at::Tensor TrainingStep::evaluation_loss(const std::vector<Batch>& batches) {
  at::NoGradGuard no_grad;
  model_->eval();
  if (pipeline_) {
    const at::Tensor loss = pipeline_->forward_only(batches);
    model_->train();
    return sync_.reduce_losses(loss, zero_aux_loss_).first;
  }
  at::Tensor total;
  for (const Batch& batch : batches) {
    const at::Tensor loss = forward(batch, 0).lm_loss.to(at::kFloat);
    total = total.defined() ? total + loss : loss.clone();  // a graph's output is overwritten by its next replay
  }
  model_->train();
  return sync_.reduce_losses(total / static_cast<double>(batches.size()), zero_aux_loss_).first;
}

}  // namespace graphed::train
