// model/moe_dispatch.cpp — see model/moe_dispatch.h.
#include "graphed/model/moe_dispatch.h"

#include <limits>

#include "graphed/capture/capture_state.h"
#include "graphed/model/moe.h"
#include "graphed/util/error.h"

namespace graphed::model {

DispatchPlan DropAndPadDispatch::plan(const MoeImpl& moe, const at::Tensor& indices, const at::Tensor& weights) const {
  const int64_t assignments = indices.numel();
  const int64_t e = moe.shape().num_experts;
  const at::Tensor expert_of = indices.reshape({-1});
  const int64_t c = moe.capacity(indices.size(0));
  const at::Tensor scores = at::full({e, assignments}, -std::numeric_limits<double>::infinity(), weights.options())
                                .scatter(0, expert_of.reshape({1, -1}), weights.detach().reshape({1, -1}));
  const auto kept = scores.topk(c, 1);  // [E, C]: the C most probable assignments of each expert
  const at::Tensor valid = at::isfinite(std::get<0>(kept));
  DispatchPlan plan;
  plan.gather_index = at::where(valid, std::get<1>(kept), at::full_like(std::get<1>(kept), assignments)).reshape({-1});
  return plan;
}

DispatchPlan DropAndPadDispatch::plan_from_tensors(const std::vector<at::Tensor>& tensors) const {
  DispatchPlan plan;
  plan.gather_index = tensors[0];
  return plan;
}

at::Tensor DropAndPadDispatch::run_experts(MoeImpl& moe, const at::Tensor& per_assignment,
                                           const DispatchPlan& plan) const {
  const int64_t assignments = per_assignment.size(0);
  const int64_t h = per_assignment.size(1);
  const int64_t e = moe.shape().num_experts;
  const int64_t c = plan.gather_index.numel() / e;
  // Row T x k is a zero token: empty slots gather it, and their outputs land there and are cut off.
  const at::Tensor padded = at::cat({per_assignment, at::zeros({1, h}, per_assignment.options())});
  const at::Tensor expert_output = moe.all_experts(padded.index_select(0, plan.gather_index).view({e, c, h}));
  const at::Tensor flat = expert_output.reshape({e * c, h});
  return scatter_to_assignments(flat, plan.gather_index, assignments);
}

DispatchPlan sorted_plan(const at::Tensor& indices, int64_t experts) {
  const at::Tensor expert_of = indices.reshape({-1});
  DispatchPlan plan;
  plan.order = std::get<1>(at::sort(expert_of, /*stable=*/true, 0, /*descending=*/false));
  plan.counts = at::zeros({experts}, expert_of.options()).index_add_(0, expert_of, at::ones_like(expert_of));
  return plan;
}

DispatchPlan SortedPlanDispatch::plan(const MoeImpl& moe, const at::Tensor& indices,
                                      const at::Tensor& /*weights*/) const {
  return sorted_plan(indices, moe.shape().num_experts);
}

at::Tensor scatter_to_assignments(const at::Tensor& results, const at::Tensor& assignment_of_row, int64_t assignments) {
  return at::zeros({assignments + 1, results.size(1)}, results.options())
      .index_put({assignment_of_row}, results)
      .narrow(0, 0, assignments);
}

DispatchPlan sorted_plan_from(const std::vector<at::Tensor>& tensors) {
  DispatchPlan plan;
  plan.order = tensors[0];
  plan.counts = tensors[1];
  return plan;
}

at::Tensor DroplessDispatch::run_experts(MoeImpl& moe, const at::Tensor& per_assignment,
                                         const DispatchPlan& plan) const {
  GRAPHED_CHECK(!capture::is_graph_capturing(), CaptureError,
                "the dropless MoE reads its per-expert token counts on the host, which a CUDA graph cannot "
                "capture; fix: graph only the router and the dispatch preprocessing of dropless MoE layers, or make "
                "them drop-and-pad (an expert capacity factor with padding to capacity)");
  const int64_t assignments = per_assignment.size(0);
  const at::Tensor permuted = per_assignment.index_select(0, plan.order);
  const at::Tensor counts = plan.counts.to(at::kCPU);  // host sync: dropless shapes are dynamic
  std::vector<at::Tensor> pieces;
  int64_t offset = 0;
  for (int64_t expert = 0; expert < moe.shape().num_experts; ++expert) {
    const int64_t n = counts[expert].item<int64_t>();
    if (n > 0) pieces.push_back(moe.expert_mlp(permuted.narrow(0, offset, n), expert));
    offset += n;
  }
  const at::Tensor computed = at::cat(pieces);
  return scatter_to_assignments(computed, plan.order, assignments);
}

at::Tensor GroupedDispatch::run_experts(MoeImpl& moe, const at::Tensor& per_assignment,
                                        const DispatchPlan& plan) const {
  const int64_t assignments = per_assignment.size(0);
  // offsets[e] .. offsets[e + 1]: expert e's rows of the sorted assignments, on the device.
  const at::Tensor offsets = at::cat({at::zeros({1}, plan.counts.options()), plan.counts.cumsum(0)});
  const at::Tensor computed = moe.grouped_experts(per_assignment.index_select(0, plan.order), offsets);
  return scatter_to_assignments(computed, plan.order, assignments);
}

}  // namespace graphed::model
