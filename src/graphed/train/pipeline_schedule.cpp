// train/pipeline_schedule.cpp — see train/pipeline_schedule.h.
#include "graphed/train/pipeline_schedule.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "graphed/capture/schedule_order.h"
#include "graphed/train/training_step.h"
#include "graphed/util/error.h"

namespace graphed::train {

PipelineSchedule::PipelineSchedule(TrainingStep& step, dist::ProcessGroups& groups, GradientSync& sync)
    : step_(step), groups_(groups), sync_(sync) {
  const dist::ParallelLayout& layout = groups.layout();
  for (int64_t c = 0; c < layout.chunks; ++c) {
    const dist::ModelChunk chunk = layout.chunk(c);
    chunks_.push_back({chunk.first_layer, chunk.end_layer(), chunk.first_stage, chunk.last_stage});
  }
  const auto& config = step.config();
  // With sequence parallelism a stage sends its tensor rank's part of the sequence.
  const int64_t sequence_parts = config.train.sequence_parallel ? layout.tensor_size : 1;
  activation_shape_ = {config.train.micro_batch_size, config.model.seq_length / sequence_parts,
                       config.model.hidden_size};
}

std::vector<int64_t> PipelineSchedule::order(int64_t microbatches) const {
  const dist::ParallelLayout& layout = groups_.layout();
  capture::PipelineRank rank;
  rank.microbatches = microbatches;
  rank.chunks = layout.chunks;
  rank.pipeline_size = layout.pipeline_size;
  rank.rank = layout.pipeline_rank();
  rank.microbatch_group = layout.pipeline_size;  // Megatron's default group per virtual stage
  return capture::convert_schedule_table_to_order(
      capture::warmup_microbatches(rank), layout.chunks,
      capture::schedule_table(microbatches, layout.chunks, rank.microbatch_group));
}

int64_t PipelineSchedule::stage_of(int64_t chunk) const {
  return groups_.layout().virtual_stage(groups_.layout().pipeline_rank(), chunk);
}

at::Tensor PipelineSchedule::receive(int64_t boundary, dist::LinkDirection direction, int64_t microbatch) {
  // Forward links carry from group rank 0 (stage `boundary`) to 1; backward links the other way.
  dist::Communicator& link = groups_.link(boundary, direction);
  const int64_t peer = direction == dist::LinkDirection::kForward ? 0 : 1;
  at::Tensor tensor = at::empty(activation_shape_, at::TensorOptions().device(step_.device()).dtype(at::kFloat));
  link.receive(tensor, peer, microbatch).wait();
  return tensor;
}

void PipelineSchedule::send(at::Tensor tensor, int64_t boundary, dist::LinkDirection direction, int64_t microbatch) {
  GRAPHED_INTERNAL_ASSERT(tensor.scalar_type() == at::kFloat && tensor.sizes() == at::IntArrayRef(activation_shape_),
                          "pipeline transfer of ", tensor.sizes(), " ", tensor.scalar_type());
  dist::Communicator& link = groups_.link(boundary, direction);
  const int64_t peer = direction == dist::LinkDirection::kForward ? 1 : 0;
  tensor = tensor.contiguous();
  sends_.push_back(link.send(tensor, peer, microbatch));
  sent_.push_back(tensor);
}

PipelineSchedule::InFlight PipelineSchedule::forward_step(int64_t chunk, int64_t microbatch, const Batch& batch,
                                                          double scale, bool with_grad) {
  const model::LayerRange& range = chunks_[static_cast<std::size_t>(chunk)];
  const int64_t stage = stage_of(chunk);
  InFlight work;
  if (range.first_stage) {
    work.input = batch.tokens;
  } else {
    work.input = receive(stage - 1, dist::LinkDirection::kForward, microbatch);
    if (with_grad) work.input.requires_grad_(true);
  }
  const model::ChunkOutput output = step_.forward_chunk(range, work.input, batch.labels, microbatch);
  if (output.aux_loss.defined()) {
    const at::Tensor aux = output.aux_loss.detach().to(at::kFloat);
    aux_sum_ = aux_sum_.defined() ? aux_sum_.add_(aux) : aux.clone();
    work.aux_loss = output.aux_loss * scale;
  }
  if (range.last_stage) {
    const at::Tensor lm = output.lm_loss.detach().to(at::kFloat);
    loss_sum_ = loss_sum_.defined() ? loss_sum_.add_(lm) : lm.clone();
    work.output = output.lm_loss * scale;
  } else {
    work.output = output.hidden;
    send(output.hidden.detach(), stage, dist::LinkDirection::kForward, microbatch);
  }
  return work;
}

void PipelineSchedule::backward_step(int64_t chunk, int64_t microbatch, InFlight& work) {
  const model::LayerRange& range = chunks_[static_cast<std::size_t>(chunk)];
  const int64_t stage = stage_of(chunk);
  std::vector<at::Tensor> outputs, gradients;
  if (range.last_stage) {
    outputs.push_back(work.aux_loss.defined() ? work.output + work.aux_loss : work.output);
    gradients.push_back(at::ones_like(outputs.back()));
  } else {
    outputs.push_back(work.output);
    gradients.push_back(receive(stage, dist::LinkDirection::kBackward, microbatch).to(work.output.scalar_type()));
    if (work.aux_loss.defined()) {
      outputs.push_back(work.aux_loss);
      gradients.push_back(at::ones_like(work.aux_loss));
    }
  }
  torch::autograd::backward(outputs, gradients);
  if (!range.first_stage) send(work.input.grad(), stage - 1, dist::LinkDirection::kBackward, microbatch);
  work = InFlight();  // the activations go as soon as their backward is done
}

void PipelineSchedule::finish_sends() {
  for (dist::PendingWork& work : sends_) work.wait();
  sends_.clear();
  sent_.clear();
}

at::Tensor PipelineSchedule::sum_or_zero(const at::Tensor& sum) const {
  return sum.defined() ? sum : at::zeros({}, at::TensorOptions().device(step_.device()).dtype(at::kFloat));
}

std::pair<at::Tensor, at::Tensor> PipelineSchedule::forward_backward(const std::vector<Batch>& microbatches) {
  const auto count = static_cast<int64_t>(microbatches.size());
  const double scale = 1.0 / static_cast<double>(count);
  const int64_t chunk_count = static_cast<int64_t>(chunks_.size());
  std::vector<std::deque<InFlight>> in_flight(static_cast<std::size_t>(chunk_count));
  std::vector<int64_t> forwards(static_cast<std::size_t>(chunk_count), 0), backwards(forwards);
  int64_t backwards_left = count * chunk_count;
  loss_sum_ = at::Tensor();
  aux_sum_ = at::Tensor();
  for (const int64_t entry : order(count)) {
    const auto chunk = static_cast<std::size_t>(std::abs(entry) - 1);
    if (entry > 0) {
      const int64_t microbatch = forwards[chunk]++;
      in_flight[chunk].push_back(forward_step(static_cast<int64_t>(chunk), microbatch,
                                              microbatches[static_cast<std::size_t>(microbatch)], scale, true));
    } else {
      const int64_t microbatch = backwards[chunk]++;
      if (--backwards_left == 0) sync_.before_last_backward();
      backward_step(static_cast<int64_t>(chunk), microbatch, in_flight[chunk].front());
      in_flight[chunk].pop_front();
    }
  }
  finish_sends();
  sync_.after_backward();
  return {sum_or_zero(loss_sum_).mul(scale), sum_or_zero(aux_sum_).mul(scale)};
}

at::Tensor PipelineSchedule::forward_only(const std::vector<Batch>& microbatches, bool with_grad) {
  at::AutoGradMode grad_mode(with_grad);
  const auto count = static_cast<int64_t>(microbatches.size());
  loss_sum_ = at::Tensor();
  aux_sum_ = at::Tensor();
  // Microbatch by microbatch through the rank's chunks: every stage's input is produced by an earlier
  // (microbatch, stage), so no rank waits for one that waits for it.
  for (int64_t microbatch = 0; microbatch < count; ++microbatch) {
    for (int64_t chunk = 0; chunk < static_cast<int64_t>(chunks_.size()); ++chunk) {
      forward_step(chunk, microbatch, microbatches[static_cast<std::size_t>(microbatch)], 1.0, with_grad);
    }
  }
  finish_sends();
  return sum_or_zero(loss_sum_).div(static_cast<double>(count));
}

}  // namespace graphed::train
