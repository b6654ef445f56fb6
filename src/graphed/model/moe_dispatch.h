// model/moe_dispatch.h — how an MoE's assignments reach its experts and come back (model/moe.h), chosen once
// when the MoE is built:
//  * DropAndPadDispatch: every expert gets exactly C slots and keeps its C most probable assignments; the
//    experts run as one batched product over [E, C, h]. Static shapes: capturable.
//  * DroplessDispatch: every assignment is computed; the assignments are sorted by expert and each expert runs
//    over its own, whose count is read on the host (dynamic shapes: not capturable).
//  * GroupedDispatch (--moe-grouped-gemm): dropless too, over the same sorted assignments, but every expert runs
//    in one grouped GEMM that finds its rows from device-side offsets (kernels/grouped_gemm_ops.h): static shapes,
//    capturable, the same sums as dropless up to the order of rounding.
// A mode is its plan (what the MoE's preprocess unit computes), the plan's tensors as that unit's outputs, and
// dispatch, experts and combine over the plan. The router and the weighting of the outputs are the MoE's.
#pragma once

#include <vector>

#include <ATen/ATen.h>

namespace graphed::model {

class MoeImpl;

/// How assignments reach experts. Drop-and-pad: gather_index [E x C] (row of the assignment that fills
/// each slot; T x k = empty slot). Dropless: order [T x k] (assignments sorted by expert, stable) and
/// counts [E] (assignments per expert).
struct DispatchPlan {
  at::Tensor gather_index;
  at::Tensor order;
  at::Tensor counts;
};

class MoeDispatch {
 public:
  virtual ~MoeDispatch() = default;
  /// The plan for T tokens' routing: `indices` [T, k] (expert ids) and `weights` [T, k] (detached routing
  /// weights); token t's j-th choice is assignment t x k + j.
  virtual DispatchPlan plan(const MoeImpl& moe, const at::Tensor& indices, const at::Tensor& weights) const = 0;
  /// The plan as the preprocess unit outputs it: {gather_index} or {order, counts}.
  virtual std::vector<at::Tensor> plan_tensors(const DispatchPlan& plan) const = 0;
  /// The plan from the preprocess unit's outputs (plan_tensors' inverse).
  virtual DispatchPlan plan_from_tensors(const std::vector<at::Tensor>& tensors) const = 0;
  /// The expert output of each assignment [T k, h] (zero when dropped), from each assignment's token
  /// `per_assignment` [T k, h], through `moe`'s experts.
  virtual at::Tensor run_experts(MoeImpl& moe, const at::Tensor& per_assignment, const DispatchPlan& plan) const = 0;
};

class DropAndPadDispatch final : public MoeDispatch {
 public:
  DispatchPlan plan(const MoeImpl& moe, const at::Tensor& indices, const at::Tensor& weights) const override;
  std::vector<at::Tensor> plan_tensors(const DispatchPlan& plan) const override { return {plan.gather_index}; }
  DispatchPlan plan_from_tensors(const std::vector<at::Tensor>& tensors) const override;
  at::Tensor run_experts(MoeImpl& moe, const at::Tensor& per_assignment, const DispatchPlan& plan) const override;
};

/// Dropless plans: the assignments sorted by expert (stable) and the count of each expert's.
DispatchPlan sorted_plan(const at::Tensor& indices, int64_t experts);
/// The combine's scatter: row i of `results` [n, h] goes to assignment `assignment_of_row`[i] of [assignments, h],
/// zeros elsewhere; index `assignments` names a padding row that takes the results of empty slots and is cut off.
at::Tensor scatter_to_assignments(const at::Tensor& results, const at::Tensor& assignment_of_row, int64_t assignments);
/// A dropless plan from the preprocess unit's outputs {order, counts}.
DispatchPlan sorted_plan_from(const std::vector<at::Tensor>& tensors);

/// The dropless modes' plan: the assignments sorted by expert and the counts ({order, counts} as outputs).
class SortedPlanDispatch : public MoeDispatch {
 public:
  DispatchPlan plan(const MoeImpl& moe, const at::Tensor& indices, const at::Tensor& weights) const final;
  std::vector<at::Tensor> plan_tensors(const DispatchPlan& plan) const final { return {plan.order, plan.counts}; }
  DispatchPlan plan_from_tensors(const std::vector<at::Tensor>& tensors) const final {
    return sorted_plan_from(tensors);
  }
};

class DroplessDispatch final : public SortedPlanDispatch {
 public:
  /// Throws CaptureError inside a CUDA-graph capture: the counts are read on the host.
  at::Tensor run_experts(MoeImpl& moe, const at::Tensor& per_assignment, const DispatchPlan& plan) const override;
};

class GroupedDispatch final : public SortedPlanDispatch {
 public:
  at::Tensor run_experts(MoeImpl& moe, const at::Tensor& per_assignment, const DispatchPlan& plan) const override;
};

}  // namespace graphed::model
