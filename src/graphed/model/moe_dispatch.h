// model/moe_dispatch.h — how an MoE's assignments reach its experts and come back (model/moe.h), chosen once
// when the MoE is built:
//  * DropAndPadDispatch: every expert gets exactly C slots and keeps its C most probable assignments; the
//    experts run as one batched product over [E, C, h]. Static shapes: capturable.
//  * DroplessDispatch: every assignment is computed; the assignments are sorted by expert and each expert runs
//    over its own, whose count is read on the host (dynamic shapes: not capturable).
//  * GroupedDispatch (--moe-grouped-gemm): dropless too, over the same sorted assignments, but every expert runs
//    in one grouped GEMM that finds its rows from device-side offsets (kernels/grouped_gemm_ops.h): static shapes,
//    capturable, the same sums as dropless up to the order of rounding.
// The sort, the gathers and the weighted sum are kernels/moe_routing_ops.h's (fused kernels on CUDA).
// A mode is its plan (what the MoE's preprocess unit computes), the plan's tensors as that unit's outputs, and
// dispatch, experts and combine over the plan. The router and the weighting of the outputs are the MoE's.
#pragma once

#include <vector>

#include <ATen/ATen.h>

namespace graphed::model {

class MoeImpl;

/// How assignments reach experts. Drop-and-pad: gather_index [E x C] (row of the assignment that fills each slot;
/// T x k = empty slot). Sorted (dropless) modes: the assignments sorted by expert, stable (kernels::SortPlan): order
/// [T k] (the assignment at each sorted row), destination [T k] (each assignment's sorted row), counts [E] and offsets
/// [E + 1] (expert e's rows are offsets[e] .. offsets[e + 1]).
struct DispatchPlan {
  at::Tensor gather_index;
  at::Tensor order;
  at::Tensor destination;
  at::Tensor counts;
  at::Tensor offsets;
};

class MoeDispatch {
 public:
  virtual ~MoeDispatch() = default;
  /// The plan for T tokens' routing: `indices` [T, k] (expert ids) and `weights` [T, k] (detached routing
  /// weights); token t's j-th choice is assignment t x k + j.
  virtual DispatchPlan plan(const MoeImpl& moe, const at::Tensor& indices, const at::Tensor& weights) const = 0;
  /// The plan as the preprocess unit outputs it: {gather_index} or {order, destination, counts, offsets}.
  virtual std::vector<at::Tensor> plan_tensors(const DispatchPlan& plan) const = 0;
  /// The plan from the preprocess unit's outputs (plan_tensors' inverse).
  virtual DispatchPlan plan_from_tensors(const std::vector<at::Tensor>& tensors) const = 0;
  /// Each token's experts' outputs weighted by its routing weights and summed: tokens [T, h] and weights [T, k] ->
  /// [T, h] (a dropped assignment adds nothing).
  virtual at::Tensor run_experts(MoeImpl& moe, const at::Tensor& tokens, const at::Tensor& weights,
                                 const DispatchPlan& plan) const = 0;
};

/// The modes that fill slots from every assignment's copy of its token: the experts' output of each assignment [T
/// k, h] (zero when dropped), weighted and summed over each token's choices.
class SlotDispatch : public MoeDispatch {
 public:
  at::Tensor run_experts(MoeImpl& moe, const at::Tensor& tokens, const at::Tensor& weights,
                         const DispatchPlan& plan) const final;

 protected:
  /// The expert output of each assignment [T k, h] (zero when dropped) from each assignment's token
  /// `per_assignment` [T k, h].
  virtual at::Tensor assignment_outputs(MoeImpl& moe, const at::Tensor& per_assignment,
                                        const DispatchPlan& plan) const = 0;
};

class DropAndPadDispatch final : public SlotDispatch {
 public:
  DispatchPlan plan(const MoeImpl& moe, const at::Tensor& indices, const at::Tensor& weights) const override;
  std::vector<at::Tensor> plan_tensors(const DispatchPlan& plan) const override { return {plan.gather_index}; }
  DispatchPlan plan_from_tensors(const std::vector<at::Tensor>& tensors) const override;

 protected:
  at::Tensor assignment_outputs(MoeImpl& moe, const at::Tensor& per_assignment,
                                const DispatchPlan& plan) const override;
};

/// Dropless plans: the assignments sorted by expert (stable), from indices [T, k] (kernels::moe_sort_plan).
DispatchPlan sorted_plan(const at::Tensor& indices, int64_t experts);
/// The combine's scatter: row i of `results` [n, h] goes to row `row_of`[i] of [rows, h], zeros elsewhere; index
/// `rows` names a padding row that takes the results of empty slots and is cut off.
at::Tensor scatter_to_assignments(const at::Tensor& results, const at::Tensor& row_of, int64_t rows);

/// The dropless modes: every assignment is computed. The tokens are gathered into expert order (cast to the
/// experts' product type), the mode runs the experts over those rows, and each token's outputs are weighted and
/// summed back (kernels::moe_permute and moe_unpermute: on CUDA one launch each way, no [T k, h] copies).
class SortedPlanDispatch : public MoeDispatch {
 public:
  DispatchPlan plan(const MoeImpl& moe, const at::Tensor& indices, const at::Tensor& weights) const final;
  std::vector<at::Tensor> plan_tensors(const DispatchPlan& plan) const final {
    return {plan.order, plan.destination, plan.counts, plan.offsets};
  }
  DispatchPlan plan_from_tensors(const std::vector<at::Tensor>& tensors) const final;
  at::Tensor run_experts(MoeImpl& moe, const at::Tensor& tokens, const at::Tensor& weights,
                         const DispatchPlan& plan) const final;

 protected:
  /// The experts' outputs [T k, h] over `sorted` [T k, h] (row r: assignment plan.order[r]'s token), in the same
  /// order; zero for a row not computed.
  virtual at::Tensor sorted_outputs(MoeImpl& moe, const at::Tensor& sorted, const DispatchPlan& plan) const = 0;
};

class DroplessDispatch final : public SortedPlanDispatch {
 protected:
  /// Throws CaptureError inside a CUDA-graph capture: the counts are read on the host.
  at::Tensor sorted_outputs(MoeImpl& moe, const at::Tensor& sorted, const DispatchPlan& plan) const override;
};

class GroupedDispatch final : public SortedPlanDispatch {
 protected:
  at::Tensor sorted_outputs(MoeImpl& moe, const at::Tensor& sorted, const DispatchPlan& plan) const override;
};

}  // namespace graphed::model
