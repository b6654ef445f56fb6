// train/gradient_sync.h — what one iteration's gradients and losses go through across ranks, chosen
// once by the trainer: nothing for one process (GradientSync itself), or data-parallel averaging in
// buckets with the losses averaged over the ranks (train/data_parallel_sync.h). The training step
// calls the same four hooks either way, so a runner captures or replays them like any other work.
#pragma once

#include <utility>

#include <ATen/ATen.h>

#include "graphed/train/adamw.h"

namespace graphed::train {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  /// At the start of an iteration, before its first forward (the distributed optimizer's overlapped gathers
  /// launch here).
  virtual void before_forward() {}
  /// Before the last microbatch's backward (an overlapping reducer arms its hooks here).
  virtual void before_last_backward() {}
  /// After the last backward: the gradients become the mean over the data-parallel ranks.
  virtual void after_backward() {}
  /// The global gradient norm (float32 device scalar), every parameter of the model counted once.
  virtual at::Tensor gradient_norm(const AdamW& optimizer) { return optimizer.gradient_norm(); }
  /// After the optimizer's step (the distributed optimizer gathers the parameters from the ranks' shards here).
  virtual void after_step() {}
  /// {LM loss, aux loss} (device scalars) averaged over the ranks that computed them.
  virtual std::pair<at::Tensor, at::Tensor> reduce_losses(const at::Tensor& loss, const at::Tensor& aux_loss) {
    return {loss, aux_loss};
  }
};

}  // namespace graphed::train
