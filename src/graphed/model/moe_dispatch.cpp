// model/moe_dispatch.cpp — see model/moe_dispatch.h.
#include "graphed/model/moe_dispatch.h"

#include <limits>

#include "graphed/capture/capture_state.h"
#include "graphed/kernels/moe_routing_ops.h"
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

at::Tensor SlotDispatch::run_experts(MoeImpl& moe, const at::Tensor& tokens, const at::Tensor& weights,
                                     const DispatchPlan& plan) const {
  const int64_t t = tokens.size(0);
  const int64_t h = tokens.size(1);
  const int64_t k = weights.size(1);
  const at::Tensor per_assignment = tokens.unsqueeze(1).expand({t, k, h}).reshape({t * k, h});
  const at::Tensor output = assignment_outputs(moe, per_assignment, plan);  // [T k, h], zero when dropped
  return (output.view({t, k, h}) * weights.reshape({t, k, 1}).to(output.scalar_type())).sum(1);
}

at::Tensor DropAndPadDispatch::assignment_outputs(MoeImpl& moe, const at::Tensor& per_assignment,
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
  const kernels::SortPlan sorted = kernels::moe_sort_plan(indices.reshape({-1}), experts);
  DispatchPlan plan;
  plan.order = sorted.order;
  plan.destination = sorted.destination;
  plan.counts = sorted.counts;
  plan.offsets = sorted.offsets;
  return plan;
}

at::Tensor scatter_to_assignments(const at::Tensor& results, const at::Tensor& row_of, int64_t rows) {
  return at::zeros({rows + 1, results.size(1)}, results.options()).index_put({row_of}, results).narrow(0, 0, rows);
}

DispatchPlan SortedPlanDispatch::plan(const MoeImpl& moe, const at::Tensor& indices,
                                      const at::Tensor& /*weights*/) const {
  return sorted_plan(indices, moe.shape().num_experts);
}

DispatchPlan SortedPlanDispatch::plan_from_tensors(const std::vector<at::Tensor>& tensors) const {
  DispatchPlan plan;
  plan.order = tensors[0];
  plan.destination = tensors[1];
  plan.counts = tensors[2];
  plan.offsets = tensors[3];
  return plan;
}

at::Tensor SortedPlanDispatch::run_experts(MoeImpl& moe, const at::Tensor& tokens, const at::Tensor& weights,
                                           const DispatchPlan& plan) const {
  const at::Tensor sorted =
      kernels::moe_permute(tokens, plan.order, plan.destination, weights.size(1), expert_product_type(tokens));
  return kernels::moe_unpermute(sorted_outputs(moe, sorted, plan), weights, plan.order, plan.destination);
}

at::Tensor DroplessDispatch::sorted_outputs(MoeImpl& moe, const at::Tensor& sorted, const DispatchPlan& plan) const {
  GRAPHED_CHECK(!capture::is_graph_capturing(), CaptureError,
                "the dropless MoE reads its per-expert token counts on the host, which a CUDA graph cannot "
                "capture; fix: graph only the router and the dispatch preprocessing of dropless MoE layers, or make "
                "them drop-and-pad (an expert capacity factor with padding to capacity)");
  const at::Tensor counts = plan.counts.to(at::kCPU);  // host sync: dropless shapes are dynamic
  std::vector<at::Tensor> pieces;
  int64_t offset = 0;
  for (int64_t expert = 0; expert < moe.shape().num_experts; ++expert) {
    const int64_t n = counts[expert].item<int64_t>();
    if (n > 0) pieces.push_back(moe.expert_mlp(sorted.narrow(0, offset, n), expert));
    offset += n;
  }
  return at::cat(pieces);
}

at::Tensor GroupedDispatch::sorted_outputs(MoeImpl& moe, const at::Tensor& sorted, const DispatchPlan& plan) const {
  return moe.grouped_experts(sorted, plan.offsets);
}

}  // namespace graphed::model
