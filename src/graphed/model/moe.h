// model/moe.h — the mixture-of-experts MLP: top-k softmax router with Megatron's switch
// load-balancing loss, an optional shared expert, and one of three dispatch modes, chosen when it is built
// (model/moe_dispatch.h):
//  * drop-and-pad (--moe-expert-capacity-factor + --moe-pad-expert-input-to-capacity): every expert
//    gets exactly C = ceil(tokens x top-k / experts x factor) slots; the C assignments with the
//    highest routing probability are kept (Megatron's "probs" drop policy). Static shapes.
//  * dropless: every assignment is computed; per-expert counts are read on the host (dynamic shapes).
//  * grouped dropless (--moe-grouped-gemm): every assignment is computed, all experts in one grouped GEMM
//    that reads the counts on the device (static shapes).
// Token t's j-th choice is assignment t x k + j; dispatch and combine are gathers and one sum over k in choice order
// (fused kernels on CUDA, kernels/moe_routing_ops.h): deterministic, no atomics on real rows. No norm or residual here.
// Under expert parallelism a rank holds a contiguous share of the experts and exchanges the assignments
// all-to-all (model/moe_expert_dispatch.h); the router and the shared expert stay whole on every rank. With tensor
// parallelism too, each expert's ffn is split over the tensor ranks as without it, and the exchange runs between
// ranks of one tensor rank: every tensor rank of a data rank routes the same tokens, sends them to the same expert
// ranks, and gets back its partial outputs, which leaving the layer sums (Megatron's expert tensor size = tensor size).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "graphed/kernels/paged_stash.h"
#include "graphed/model/expert_parallel.h"
#include "graphed/model/mlp.h"
#include "graphed/model/moe_dispatch.h"
#include "graphed/model/paged_experts.h"

namespace graphed::model {

struct MoeShape {
  int64_t hidden_size = 0;
  int64_t num_experts = 0;
  int64_t top_k = 2;
  int64_t expert_ffn_hidden_size = 0;
  std::optional<int64_t> shared_expert_size;  ///< unset = no shared expert
  bool shared_expert_gate = false;            ///< the shared expert's output x sigmoid(tokens . gate [1, h])
  bool pre_softmax = false;                   ///< softmax over every expert, then top-k (not renormalised)
  std::optional<double> capacity_factor;      ///< unset = dropless
  bool pad_to_capacity = false;               ///< with capacity_factor: drop-and-pad
  bool grouped_gemm = false;                  ///< dropless: every expert in one grouped GEMM (static shapes)
  /// Grouped dropless under expert parallelism: each rank sends each rank a block of F x its even share of rows
  /// (static shapes); unset = the counts are exchanged and read on the host.
  std::optional<double> expert_rank_capacity_factor;
  double aux_loss_coeff = 0.0;
  bool swiglu = false;
  bool bias = true;
  double init_std = 0.02;
  double output_init_std = 0.02;
  bool openai_gelu = false;  ///< GELU's tanh approximation (experts and shared expert)
};

/// The type the experts' products run in: bf16 under CUDA autocast (as at::bmm would), else the input's.
at::ScalarType expert_product_type(const at::Tensor& input);

/// The router's decision for T tokens.
struct Routing {
  at::Tensor weights;   ///< [T, k] float32: softmax over the chosen experts' logits, or (pre_softmax) their
                        ///< probabilities of the softmax over every expert
  at::Tensor indices;   ///< [T, k] int64 expert ids
  at::Tensor aux_loss;  ///< scalar float32 (coefficient applied)
};

class MoeImpl : public torch::nn::Module {
 public:
  explicit MoeImpl(const MoeShape& shape);

  /// Router: tokens [T, h] -> routing. Capturable.
  Routing route(const at::Tensor& tokens);
  /// Preprocess: routing -> dispatch plan for T tokens. Capturable in every mode (static shapes).
  DispatchPlan plan(const at::Tensor& indices, const at::Tensor& weights) const;
  /// The plan as the preprocess unit outputs it: {gather_index} (drop-and-pad) or {order, destination, counts,
  /// offsets} (dropless).
  std::vector<at::Tensor> plan_tensors(const DispatchPlan& plan) const { return active_->plan_tensors(plan); }
  /// The plan from the preprocess unit's outputs (plan_tensors' inverse).
  DispatchPlan plan_from_tensors(const std::vector<at::Tensor>& tensors) const {
    return active_->plan_from_tensors(tensors);
  }
  /// Dispatch, experts and combine: tokens [T, h] -> [T, h]. Drop-and-pad and grouped are capturable;
  /// dropless reads the per-expert counts on the host.
  at::Tensor run_experts(const at::Tensor& tokens, const at::Tensor& weights, const DispatchPlan& plan);
  /// The shared expert's output [T, h] (gated when the shape says so), or an undefined tensor when there is none.
  at::Tensor shared_expert(const at::Tensor& tokens);
  /// The shared expert takes the path (model/kernel_path.h); the router and the experts read their weights through
  /// it (KernelPath::working_weight) and run their own products.
  void use_kernel_path(const std::shared_ptr<const KernelPath>& path) {
    path_ = path;
    if (shared_) shared_->use_kernel_path(path);
  }
  /// Everything above: tokens [T, h] -> (output [T, h], aux loss).
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& tokens);
  /// Tensor parallelism as Megatron splits experts without expert parallelism (its expert tensor size is
  /// the tensor size): every rank routes every token alike and holds every expert's part of the ffn (fc1
  /// column-parallel, SwiGLU's halves split alike; fc2 row-parallel with its bias on the first rank); the
  /// experts' partial outputs, weighted, are summed over the ranks, and the shared expert splits as an MLP.
  void split_for_tensor_parallel(const TensorParallel& tensor);
  /// Megatron's expert tensor size 1, before split_for_tensor_parallel: every expert stays whole on its expert rank.
  /// The router's load-balancing sums and the shared expert still use the tensor ranks, but the experts see this
  /// rank's tokens only (its part of the sequence under sequence parallelism): nothing is gathered for them and
  /// their outputs are not summed over the tensor ranks. Only with expert parallelism, whose groups then run across
  /// the tensor ranks.
  void keep_experts_whole() { experts_whole_ = true; }
  /// How each parameter (by its name in this module) lies over the tensor-parallel ranks.
  std::vector<std::pair<std::string, ParameterSplit>> tensor_splits() const;

  /// Expert parallelism (Megatron's --expert-model-parallel-size, its contiguous assignment): this rank keeps
  /// experts [rank x E / size, (rank + 1) x E / size) of every expert tensor, and the dispatch becomes the
  /// all-to-all of its mode. With tensor parallelism, after split_for_tensor_parallel (of the tensor ranks' parts).
  void split_for_expert_parallel(const ExpertParallel& expert);
  /// Under expert parallelism with a rank capacity factor: whether a block overflowed since the last call (and the
  /// most rows a block had to hold), as a device tensor int64 [2] {overflowed 0/1, rows needed}; zeroed by the
  /// call. Undefined where no block was filled.
  at::Tensor take_overflow();
  /// Records a block's overflow (static dispatch): `overflowed` and `rows_needed` int64 scalars on the device.
  void record_overflow(const at::Tensor& overflowed, const at::Tensor& rows_needed);
  /// With `dropless`, the static dispatch gives way to the dropless one (an overflowed iteration's rerun); both
  /// were built when the MoE was split.
  void use_dropless_dispatch(bool dropless) { active_ = dropless && fallback_ ? fallback_.get() : dispatch_.get(); }
  /// Megatron's paged stash (--moe-paged-stash): the fixed blocks' experts keep the rows their backward needs in
  /// `stash` (shared by every MoE layer of the model), only the rows that carry an assignment (block_experts).
  void use_paged_stash(std::shared_ptr<kernels::PagedStash> stash) { stash_ = std::move(stash); }
  /// How each expert tensor (by its name in this module) lies over the expert-parallel ranks: dimension 0, the
  /// global expert id, split in equal parts.
  std::vector<std::pair<std::string, ParameterSplit>> expert_splits() const;
  const ExpertParallel& expert_parallel() const { return expert_; }

  /// The parameters that route rather than transform tokens (the router, the shared expert's gate): they stay in
  /// bf16 under FP8, as Megatron keeps them.
  std::vector<at::Tensor> routing_parameters() const {
    return shared_gate_.defined() ? std::vector<at::Tensor>{router_weight_, shared_gate_}
                                  : std::vector<at::Tensor>{router_weight_};
  }

  /// Slots per expert for this many tokens (drop-and-pad).
  int64_t capacity(int64_t num_tokens) const;
  const MoeShape& shape() const { return shape_; }

  /// One of this rank's experts' ffn over its tokens [n, h] -> [n, h] (this rank's part under tensor
  /// parallelism; `expert` counts this rank's experts under expert parallelism).
  at::Tensor expert_mlp(const at::Tensor& input, int64_t expert);
  /// Every expert's ffn at once over its slots [E, C, h] -> [E, C, h] (E: this rank's experts).
  at::Tensor all_experts(const at::Tensor& input);
  /// Every expert's ffn at once over assignments sorted by expert [A, h] -> [A, h], expert e's rows being
  /// offsets[e] .. offsets[e + 1] (int64 [E + 1] on the device): grouped GEMMs, nothing read on the host.
  at::Tensor grouped_experts(const at::Tensor& sorted, const at::Tensor& offsets);
  /// grouped_experts over fixed expert blocks [R, h] whose first `filled` rows (int64 scalar on the device) carry
  /// assignments, `balanced` of them on a balanced load: through the paged stash where the MoE has one
  /// (model/paged_experts.h), else grouped_experts.
  at::Tensor block_experts(const at::Tensor& rows, const at::Tensor& offsets, const at::Tensor& filled,
                           int64_t balanced);

 private:
  /// The experts' weights as grouped_experts' products read them, in `type`.
  GroupedMlpWeights grouped_weights(at::ScalarType type) const;

  MoeShape shape_;
  std::unique_ptr<const MoeDispatch> dispatch_;  ///< drop-and-pad, dropless or grouped, from the shape
  std::unique_ptr<const MoeDispatch> fallback_;  ///< the dropless all-to-all, beside a static dispatch
  const MoeDispatch* active_ = nullptr;          ///< dispatch_, or fallback_ during a rerun
  std::shared_ptr<kernels::PagedStash> stash_;   ///< --moe-paged-stash: the model's, for block_experts
  at::Tensor overflow_;                          ///< int64 [2]: overflowed since take_overflow, rows needed
  at::Tensor router_weight_;                     // [E, h]
  at::Tensor shared_gate_;                       // [1, h] (shared_expert_gate only)
  at::Tensor w1_, b1_, w2_, b2_;                 // [E, h, f'], [E, 1, f'], [E, f, h], [E, 1, h]
  Mlp shared_{nullptr};
  std::shared_ptr<const KernelPath> path_ = aten_path();
  TensorParallel tensor_;         ///< the router's sums and the shared expert
  TensorParallel expert_tensor_;  ///< what splits each expert: tensor_, or one rank with keep_experts_whole
  bool experts_whole_ = false;
  ExpertParallel expert_;
};
TORCH_MODULE(Moe);

}  // namespace graphed::model
