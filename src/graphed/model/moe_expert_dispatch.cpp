// model/moe_expert_dispatch.cpp — see model/moe_expert_dispatch.h.
#include "graphed/model/moe_expert_dispatch.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "graphed/capture/capture_state.h"
#include "graphed/model/moe.h"
#include "graphed/util/error.h"

namespace graphed::model {

at::Tensor AllToAllDropAndPadDispatch::assignment_outputs(MoeImpl& moe, const at::Tensor& per_assignment,
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
  return scatter_to_assignments(returned, plan.gather_index, assignments);
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
  if (sorted.size(0) == 0) {
    // No row came: one zero row through the first expert gives the type every other rank's results have (bf16
    // under autocast, or promoted by a bias), which the all-to-all back needs alike on every rank.
    const at::Tensor zero_row = at::zeros({1, sorted.size(1)}, sorted.options());
    const auto index = at::TensorOptions().dtype(at::kLong).device(sorted.device());
    const at::Tensor first_expert_only =  // offsets [0, 1, ..., 1]: the row is expert 0's
        at::cat({at::zeros({1}, index), at::ones({static_cast<int64_t>(per_expert.size())}, index)});
    const at::Tensor typed =
        moe.shape().grouped_gemm ? moe.grouped_experts(zero_row, first_expert_only) : moe.expert_mlp(zero_row, 0);
    // Plus the (empty) rows themselves: the backward must still reach the all-to-all that brought them, which
    // every rank runs.
    return typed.narrow(0, 0, 0) + sorted.to(typed.scalar_type());
  }
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

at::Tensor AllToAllDroplessDispatch::sorted_outputs(MoeImpl& moe, const at::Tensor& sorted,
                                                    const DispatchPlan& plan) const {
  GRAPHED_CHECK(!capture::is_graph_capturing(), CaptureError,
                "the dropless MoE under expert parallelism reads on the host how many tokens each rank receives, "
                "which a CUDA graph cannot capture; fix: graph only the router and the dispatch preprocessing, or "
                "make the MoE layers drop-and-pad (an expert capacity factor with padding to capacity)");
  const ExpertParallel& expert = moe.expert_parallel();
  const int64_t h = sorted.size(1);
  const int64_t local = expert.local_experts(moe.shape().num_experts);
  const at::Tensor counts = expert.gather(plan.counts).to(at::kCPU);  // host sync: Megatron's sync point
  const Exchange exchange = exchange_for(counts, expert.rank(), local);
  // Sorted by expert, so each rank's experts are one run of rows: the uneven all-to-all sends them.
  const at::Tensor received = expert.exchange(sorted, exchange.output_splits, exchange.input_splits);
  const at::Tensor regroup = at::tensor(exchange.regroup, at::kLong).to(received.device());
  const at::Tensor output = local_experts(moe, received.index_select(0, regroup), exchange.per_expert);
  const at::Tensor by_source = at::zeros({received.size(0), h}, output.options()).index_put({regroup}, output);
  return expert.exchange(by_source, exchange.input_splits, exchange.output_splits);  // in this rank's sorted order
}

int64_t AllToAllStaticDispatch::block_rows(int64_t assignments, int64_t ranks) const {
  const double rows = std::ceil(static_cast<double>(assignments) * factor_ / static_cast<double>(ranks));
  return std::max<int64_t>(1, std::min(static_cast<int64_t>(rows), assignments));
}

namespace {

/// The sender's blocks: slot s of block d carries the s-th of this rank's sorted assignments to rank d's experts
/// while there are any (and s < B), else nothing.
struct SendBlocks {
  at::Tensor sorted_row;  ///< [ranks, B]: the sorted assignment a slot carries, or A (a zero row)
  at::Tensor carried;     ///< [ranks, B]: whether it carries one
  at::Tensor per_rank;    ///< [ranks]: assignments to each rank's experts (more than B: overflow)
};

SendBlocks send_blocks(const at::Tensor& counts, int64_t ranks, int64_t block, int64_t assignments) {
  SendBlocks blocks;
  blocks.per_rank = counts.view({ranks, -1}).sum(1);
  const at::Tensor starts = blocks.per_rank.cumsum(0) - blocks.per_rank;
  const at::Tensor slot = at::arange(block, counts.options()).unsqueeze(0);
  blocks.carried = slot < blocks.per_rank.unsqueeze(1);
  blocks.sorted_row = at::where(blocks.carried, starts.unsqueeze(1) + slot, at::full_like(slot, assignments));
  return blocks;
}

/// The receiver's view of the blocks it got, from every rank's counts [ranks, E]: where each received row goes
/// among this rank's experts' rows (expert-major, then source, then the sender's order), and those experts' offsets.
/// The empty slots go last, to the last expert (their rows are zero and their results are not sent back to use).
struct ReceivedBlocks {
  at::Tensor place;    ///< [ranks B]: received slot -> its row among the experts' rows (a permutation)
  at::Tensor offsets;  ///< [local + 1]: expert e's rows offsets[e] .. offsets[e + 1]; the last ends at ranks B
  at::Tensor filled;   ///< int64 scalar: the rows that carry an assignment, the first of the experts' rows
};

ReceivedBlocks received_blocks(const at::Tensor& all_counts, int64_t rank, int64_t local, int64_t block) {
  const int64_t ranks = all_counts.size(0);
  const at::Tensor mine = all_counts.narrow(1, rank * local, local);  // [source, local expert]
  const at::Tensor kept_end = mine.cumsum(1).clamp_max(block);        // within each source's block
  const at::Tensor kept =
      kept_end - at::cat({at::zeros_like(kept_end.narrow(1, 0, 1)), kept_end.narrow(1, 0, local - 1)}, 1);
  const at::Tensor kept_start = kept_end - kept;
  const at::Tensor per_expert = kept.sum(0);
  const at::Tensor expert_start = per_expert.cumsum(0) - per_expert;
  const at::Tensor base = expert_start.unsqueeze(0) + (kept.cumsum(0) - kept) - kept_start;  // [source, expert]
  const at::Tensor slot = at::arange(block, all_counts.options()).unsqueeze(0).expand({ranks, block}).contiguous();
  const at::Tensor expert = at::searchsorted(kept_end, slot, /*out_int32=*/false, /*right=*/true).clamp_max(local - 1);
  const at::Tensor filled = (slot < kept_end.narrow(1, local - 1, 1)).reshape({-1});
  const at::Tensor filled_place = (base.gather(1, expert) + slot).reshape({-1});
  const at::Tensor empty_place = per_expert.sum() + (~filled).to(at::kLong).cumsum(0) - 1;
  ReceivedBlocks blocks;
  blocks.place = at::where(filled, filled_place, empty_place);
  blocks.offsets = at::cat({at::zeros({1}, per_expert.options()), per_expert.cumsum(0).narrow(0, 0, local - 1),
                            at::full({1}, ranks * block, per_expert.options())});
  blocks.filled = per_expert.sum();
  return blocks;
}

}  // namespace

at::Tensor AllToAllStaticDispatch::sorted_outputs(MoeImpl& moe, const at::Tensor& sorted,
                                                  const DispatchPlan& plan) const {
  const ExpertParallel& expert = moe.expert_parallel();
  const int64_t assignments = sorted.size(0);
  const int64_t h = sorted.size(1);
  const int64_t ranks = expert.size();
  const int64_t local = expert.local_experts(moe.shape().num_experts);
  const int64_t block = block_rows(assignments, ranks);
  const SendBlocks send = send_blocks(plan.counts, ranks, block, assignments);
  moe.record_overflow((send.per_rank > block).any(), send.per_rank.max());
  // Row A is a zero token: empty slots carry it.
  const at::Tensor padded = at::cat({sorted, at::zeros({1, h}, sorted.options())});
  const at::Tensor received = expert.exchange(padded.index_select(0, send.sorted_row.reshape({-1})), {}, {});
  const ReceivedBlocks blocks = received_blocks(expert.gather(plan.counts), expert.rank(), local, block);
  const at::Tensor by_place =
      at::empty_like(blocks.place).scatter_(0, blocks.place, at::arange(ranks * block, blocks.place.options()));
  // On a balanced load a rank receives as many rows as it sends (the paged stash's size, where there is one).
  const at::Tensor output =
      moe.block_experts(received.index_select(0, by_place), blocks.offsets, blocks.filled, assignments);
  const at::Tensor returned = expert.exchange(output.index_select(0, blocks.place), {}, {});  // this rank's slots
  // Each carried slot's result goes to its sorted row; empty slots to row A, cut off (an overflowed row stays zero).
  return scatter_to_assignments(returned, send.sorted_row.reshape({-1}), assignments);
}

}  // namespace graphed::model
