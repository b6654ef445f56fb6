// model/moe_expert_dispatch.h — the MoE dispatch modes under expert parallelism (model/expert_parallel.h): each
// rank holds experts [first, first + E / ranks), and the assignments travel to their expert's rank and back by
// all-to-all (Megatron's alltoall dispatcher). The plans are the one-rank modes' (model/moe_dispatch.h), made
// from this rank's tokens; the routing weights stay home and are applied after the combine, as on one rank.
//  * AllToAllDropAndPadDispatch: every expert's C slots (C from this rank's tokens, as Megatron) go to its rank
//    in one equal all-to-all; no host read: capturable where the all-to-all is.
//  * AllToAllDroplessDispatch: every assignment goes, sorted by expert; the ranks' counts are exchanged and read
//    on the host (Megatron's sync point) to size the uneven all-to-all. Dynamic shapes: not capturable.
//  * AllToAllStaticDispatch (--moe-expert-rank-capacity-factor F, grouped experts): each rank sends each rank a
//    block of B = min(T k, ceil(T k F / ranks)) rows, the first B of its assignments to that rank's experts (in
//    expert order), padded with a zero row, so the all-to-all has equal splits and every shape is static; the
//    receiver learns each block's rows per expert from the ranks' counts (gathered on the device). A block with
//    more than B assignments drops the rest and marks the MoE's overflow (MoeImpl::record_overflow): the trainer
//    then runs the iteration again with the dropless dispatch. With F >= ranks no block can overflow.
//    Departure from Megatron, whose budget is one total per rank (its fused dispatchers place rows at device-made
//    offsets): an equal-split all-to-all needs a block per pair of ranks.
#pragma once

#include <vector>

#include "graphed/model/moe_dispatch.h"

namespace graphed::model {

class AllToAllDropAndPadDispatch final : public SlotDispatch {
 public:
  DispatchPlan plan(const MoeImpl& moe, const at::Tensor& indices, const at::Tensor& weights) const override {
    return local_.plan(moe, indices, weights);
  }
  std::vector<at::Tensor> plan_tensors(const DispatchPlan& plan) const override { return local_.plan_tensors(plan); }
  DispatchPlan plan_from_tensors(const std::vector<at::Tensor>& tensors) const override {
    return local_.plan_from_tensors(tensors);
  }

 protected:
  at::Tensor assignment_outputs(MoeImpl& moe, const at::Tensor& per_assignment,
                                const DispatchPlan& plan) const override;

 private:
  DropAndPadDispatch local_;  ///< the plan: every expert's C most probable assignments of this rank's tokens
};

class AllToAllDroplessDispatch final : public SortedPlanDispatch {
 protected:
  /// Throws CaptureError inside a CUDA-graph capture: the ranks' counts are read on the host.
  at::Tensor sorted_outputs(MoeImpl& moe, const at::Tensor& sorted, const DispatchPlan& plan) const override;
};

class AllToAllStaticDispatch final : public SortedPlanDispatch {
 public:
  explicit AllToAllStaticDispatch(double rank_capacity_factor) : factor_(rank_capacity_factor) {}
  /// Rows in each block for `assignments` of a rank's, over `ranks` ranks.
  int64_t block_rows(int64_t assignments, int64_t ranks) const;

 protected:
  at::Tensor sorted_outputs(MoeImpl& moe, const at::Tensor& sorted, const DispatchPlan& plan) const override;

 private:
  double factor_;
};

}  // namespace graphed::model
