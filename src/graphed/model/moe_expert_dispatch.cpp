// model/moe_expert_dispatch.cpp — see model/moe_expert_dispatch.h.
#include "graphed/model/moe_expert_dispatch.h"

#include <numeric>

#include "graphed/capture/capture_state.h"
#include "graphed/model/moe.h"
#include "graphed/util/error.h"

namespace graphed::model {

at::Tensor AllToAllDropAndPadDispatch::run_experts(MoeImpl& moe, const at::Tensor& per_assignment,
                                                   const DispatchPlan& plan) const {
  const ExpertParallel& expert = moe.expert_parallel();
  const int64_t assignments = per_assignment.size(0);
  const int64_t h = per_assignment.size(1);
  const int64_t ranks = expert.size();
  const int64_t local = expert.local_experts(moe.shape().num_experts);
  const int64_t c = plan.gather_index.numel() / moe.shape().num_experts;
  // Row T x k is a zero token: empty slots gather it, and their outputs land there and are cut off.
  const at::Tensor padded = at::cat({per_assignment, at::zeros({1, h}, per_assignment.options())});
  // The slots are expert-major, so rank r's experts are the r-th equal part: one equal all-to-all sends them.
  const at::Tensor slots = padded.index_select(0, plan.gather_index);
  const at::Tensor received = expert.exchange(slots, {}, {});  // [source][local expert][slot]
  const at::Tensor by_expert = received.view({ranks, local, c, h}).transpose(0, 1).reshape({local, ranks * c, h});
  const at::Tensor output = moe.all_experts(by_expert);
  const at::Tensor by_source = output.view({local, ranks, c, h}).transpose(0, 1).reshape({ranks * local * c, h});
  const at::Tensor returned = expert.exchange(by_source, {}, {});  // this rank's slots, expert-major again
  return at::zeros({assignments + 1, h}, returned.options())
      .index_put({plan.gather_index}, returned)
      .narrow(0, 0, assignments);
}

DispatchPlan AllToAllDroplessDispatch::plan(const MoeImpl& moe, const at::Tensor& indices,
                                            const at::Tensor& /*weights*/) const {
  return sorted_plan(indices, moe.shape().num_experts);
}

DispatchPlan AllToAllDroplessDispatch::plan_from_tensors(const std::vector<at::Tensor>& tensors) const {
  DispatchPlan plan;
  plan.order = tensors[0];
  plan.counts = tensors[1];
  return plan;
}

namespace {

/// Who sends how many rows where, from every rank's per-expert counts [ranks, E] (on the host).
struct Exchange {
  std::vector<int64_t> input_splits;   ///< rows this rank sends to each rank
  std::vector<int64_t> output_splits;  ///< rows this rank receives from each rank
  std::vector<int64_t> regroup;        ///< received rows, [source][local expert] -> [local expert][source]
  std::vector<int64_t> per_expert;     ///< rows of each local expert, after the regrouping
};

Exchange exchange_for(const at::Tensor& counts, int64_t rank, int64_t local) {
  const int64_t ranks = counts.size(0);
  const auto count = counts.accessor<int64_t, 2>();
  Exchange exchange;
  std::vector<int64_t> received_start(static_cast<std::size_t>(ranks), 0);  // where each source's rows begin
  int64_t received = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t sent = 0, coming = 0;
    for (int64_t e = 0; e < local; ++e) {
      sent += count[rank][r * local + e];
      coming += count[r][rank * local + e];
    }
    exchange.input_splits.push_back(sent);
    exchange.output_splits.push_back(coming);
    received_start[static_cast<std::size_t>(r)] = received;
    received += coming;
  }
  for (int64_t e = 0; e < local; ++e) {
    int64_t rows = 0;
    for (int64_t source = 0; source < ranks; ++source) {
      int64_t start = received_start[static_cast<std::size_t>(source)];
      for (int64_t before = 0; before < e; ++before) start += count[source][rank * local + before];
      const int64_t n = count[source][rank * local + e];
      for (int64_t i = 0; i < n; ++i) exchange.regroup.push_back(start + i);
      rows += n;
    }
    exchange.per_expert.push_back(rows);
  }
  return exchange;
}

/// Local expert e's rows of `sorted` through its ffn: one grouped GEMM, or (without --moe-grouped-gemm) one
/// product per expert as the one-rank dropless mode runs them.
at::Tensor local_experts(MoeImpl& moe, const at::Tensor& sorted, const std::vector<int64_t>& per_expert) {
  if (sorted.size(0) == 0) return sorted;
  if (moe.shape().grouped_gemm) {
    std::vector<int64_t> offsets{0};
    for (const int64_t rows : per_expert) offsets.push_back(offsets.back() + rows);
    const at::Tensor device_offsets = at::tensor(offsets, at::kLong).to(sorted.device(), /*non_blocking=*/false);
    return moe.grouped_experts(sorted, device_offsets);
  }
  std::vector<at::Tensor> pieces;
  int64_t offset = 0;
  for (std::size_t e = 0; e < per_expert.size(); ++e) {
    if (per_expert[e] > 0) pieces.push_back(moe.expert_mlp(sorted.narrow(0, offset, per_expert[e]), int64_t(e)));
    offset += per_expert[e];
  }
  return at::cat(pieces);
}

}  // namespace

at::Tensor AllToAllDroplessDispatch::run_experts(MoeImpl& moe, const at::Tensor& per_assignment,
                                                 const DispatchPlan& plan) const {
  GRAPHED_CHECK(!capture::is_graph_capturing(), CaptureError,
                "the dropless MoE under expert parallelism reads on the host how many tokens each rank receives, "
                "which a CUDA graph cannot capture; fix: graph only the router and the dispatch preprocessing, or "
                "make the MoE layers drop-and-pad (an expert capacity factor with padding to capacity)");
  const ExpertParallel& expert = moe.expert_parallel();
  const int64_t assignments = per_assignment.size(0);
  const int64_t h = per_assignment.size(1);
  const int64_t local = expert.local_experts(moe.shape().num_experts);
  const at::Tensor counts = expert.gather(plan.counts).to(at::kCPU);  // host sync: Megatron's sync point
  const Exchange exchange = exchange_for(counts, expert.rank(), local);
  // Sorted by expert, so each rank's experts are one run of rows: the uneven all-to-all sends them.
  const at::Tensor sorted = per_assignment.index_select(0, plan.order);
  const at::Tensor received = expert.exchange(sorted, exchange.output_splits, exchange.input_splits);
  const at::Tensor regroup = at::tensor(exchange.regroup, at::kLong).to(received.device());
  const at::Tensor output = local_experts(moe, received.index_select(0, regroup), exchange.per_expert);
  const at::Tensor by_source = at::zeros({received.size(0), h}, output.options()).index_put({regroup}, output);
  const at::Tensor returned = expert.exchange(by_source, exchange.input_splits, exchange.output_splits);
  return at::zeros({assignments, h}, returned.options()).index_put({plan.order}, returned);
}

}  // namespace graphed::model
