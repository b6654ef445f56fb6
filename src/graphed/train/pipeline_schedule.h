// train/pipeline_schedule.h — forward and backward over the microbatches when the model is split into
// pipeline stages (--pipeline-model-parallel-size, and virtual stages for the interleaved schedule).
// It walks the rank's order from capture/schedule_order.h (Megatron's 1F1B / interleaved schedule:
// +c = forward of chunk c's next microbatch, -c = backward of its oldest): a forward receives its
// input from the previous stage (or embeds the tokens), runs the chunk and sends its output on; a
// backward receives the output's gradient from the next stage (or starts from the loss) and sends
// the input's gradient back. Each pipeline boundary has one link per direction
// (dist/process_groups.h), so the transfers of a link arrive in the order they were sent.
#pragma once

#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "graphed/dist/process_groups.h"
#include "graphed/model/gpt_model.h"
#include "graphed/train/gradient_sync.h"
#include "graphed/train/token_dataset.h"

namespace graphed::train {

class TrainingStep;

class PipelineSchedule {
 public:
  /// step, groups, sync: not owned, outlive this.
  PipelineSchedule(TrainingStep& step, dist::ProcessGroups& groups, GradientSync& sync);

  /// The rank's part of forward and backward over the microbatches; returns this rank's {LM loss sum,
  /// aux loss sum} x 1/M (zero LM loss off the last stage). Gradients accumulate in the optimizer's buffers.
  std::pair<at::Tensor, at::Tensor> forward_backward(const std::vector<Batch>& microbatches);
  /// Forward only, microbatch by microbatch: this rank's mean LM loss (zero off the last stage). Without
  /// grad for evaluation; with_grad records the units' arguments as training sees them (no backward).
  at::Tensor forward_only(const std::vector<Batch>& microbatches, bool with_grad = false);
  /// The order this rank walks for M microbatches (+c forward, -c backward of chunk c, 1-based).
  std::vector<int64_t> order(int64_t microbatches) const;
  /// The layer ranges of this rank's model chunks.
  const std::vector<model::LayerRange>& chunks() const { return chunks_; }

 private:
  /// A forward whose backward is still to come.
  struct InFlight {
    at::Tensor input;     ///< received hidden states (a leaf needing grad), or tokens on the first stage
    at::Tensor output;    ///< hidden states to send on, or the scaled loss on the last stage
    at::Tensor aux_loss;  ///< scaled MoE aux loss of this chunk (undefined when none)
  };
  InFlight forward_step(int64_t chunk, int64_t microbatch, const Batch& batch, double scale, bool with_grad);
  void backward_step(int64_t chunk, int64_t microbatch, InFlight& work);
  at::Tensor receive(int64_t boundary, dist::LinkDirection direction, int64_t microbatch);
  void send(at::Tensor tensor, int64_t boundary, dist::LinkDirection direction, int64_t microbatch);
  int64_t stage_of(int64_t chunk) const;
  /// Waits for the iteration's sends and releases their tensors.
  void finish_sends();
  /// A running sum, or a zero when this rank computed none (not the last stage, no MoE layer).
  at::Tensor sum_or_zero(const at::Tensor& sum) const;

  TrainingStep& step_;
  dist::ProcessGroups& groups_;
  GradientSync& sync_;
  std::vector<model::LayerRange> chunks_;
  std::vector<int64_t> activation_shape_;  ///< [micro batch, seq, hidden]
  at::Tensor loss_sum_, aux_sum_;          ///< this iteration's running sums (detached)
  std::vector<dist::PendingWork> sends_;   ///< sends in flight; waited for at the end of the iteration
  std::vector<at::Tensor> sent_;           ///< their tensors, kept alive until then
};

}  // namespace graphed::train
