// train/expert_overflow.h — the check after each forward and backward under --moe-expert-rank-capacity-factor:
// whether any MoE layer on any rank had more assignments for a rank than its block holds (model/
// moe_expert_dispatch.h), or found the paged stash full (--moe-paged-stash, kernels/paged_stash.h). One max all-reduce
// over every rank and one read on the host an iteration, as Megatron's paged-stash runner does; the training step then
// runs the iteration again with the dropless dispatch.
#pragma once

#include <cstdint>

#include "graphed/dist/communicator.h"
#include "graphed/model/gpt_model.h"

namespace graphed::train {

class ExpertOverflowCheck {
 public:
  /// world: every rank (outlives this).
  ExpertOverflowCheck(dist::Communicator& world, const at::Device& device) : world_(world), device_(device) {}
  /// Whether any rank's MoE layers overflowed a block or the paged stash since the last call (the model's record is
  /// reset). Every rank calls it at the same point.
  bool overflowed(model::GptModel& model);
  /// Iterations run again so far, and the most rows a block had to hold in the last one that overflowed a block.
  int64_t reruns() const { return reruns_; }
  int64_t rows_needed() const { return rows_needed_; }
  /// Iterations so far that found the paged stash full on some rank (each one of the reruns).
  int64_t stash_overflows() const { return stash_overflows_; }
  void count_rerun() { ++reruns_; }

 private:
  dist::Communicator& world_;
  at::Device device_;
  int64_t reruns_ = 0;
  int64_t rows_needed_ = 0;
  int64_t stash_overflows_ = 0;
};

}  // namespace graphed::train
