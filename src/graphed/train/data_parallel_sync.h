// train/data_parallel_sync.h — GradientSync for several ranks: gradients averaged over the
// data-parallel group in buckets (overlapped with the backward when `overlap`), the tied embedding's
// gradient summed over the pipeline's first and last stage, the gradient norm and the losses reduced
// over the pipeline (the loss lives on the last stage) and averaged over the data-parallel ranks; under
// tensor parallelism the norm also sums the tensor ranks' parts. Under expert parallelism the experts' gradients
// are summed over the ranks holding the same experts (divided by the data-parallel size), and the norm adds every
// expert rank's experts. With the distributed optimizer (train/gradient_shards.h) the buckets are reduce-scattered
// into each rank's shards, the norm sums the shards, and after the step the parameters are gathered. With
// --grad-reduce-in-bf16 every sum runs in bf16 (DataParallelOptions::reduce_in_bf16).
#pragma once

#include <memory>
#include <vector>

#include "graphed/dist/gradient_reducer.h"
#include "graphed/dist/process_groups.h"
#include "graphed/train/gradient_shards.h"
#include "graphed/train/gradient_sync.h"

namespace graphed::train {

struct DataParallelOptions {
  bool overlap = false;  ///< the reduction launched from the last backward's hooks
  /// The word embedding when the first and last pipeline stage both hold it (tied embeddings under pipeline
  /// parallelism), else undefined.
  at::Tensor shared_embedding;
  /// The parameters whole on every tensor-parallel rank (norms), counted in the norm by the first tensor rank.
  std::vector<at::Tensor> tensor_duplicates;
  /// Parameters whose gradient each tensor rank holds a share of, which after_backward sums over the tensor group
  /// (Megatron's all-reduce of the layernorm gradients).
  std::vector<at::Tensor> tensor_summed;
  /// How many of the optimizer's parameters, the last ones, are this rank's share of the experts.
  int64_t expert_parameters = 0;
  GradientShards* shards = nullptr;  ///< the distributed optimizer's (outliving the sync), or null
  bool defer_gathers = false;  ///< the shards' gathers launch at the next iteration's start (--overlap-param-gather)
  /// --grad-reduce-in-bf16: the sums run in bf16, staged in the optimizer's working copies where it keeps them (they
  /// are rewritten whole by the step or the gathers after it, and a bucket's copies are read no more once its
  /// gradients are complete), else in a bf16 buffer of the gradients' size.
  bool reduce_in_bf16 = false;
  /// An iteration may read the working copies again after its backward (an expert-overflow rerun,
  /// reruns_on_expert_overflow): the bf16 sums then get a buffer of their own.
  bool copies_reread = false;
};

class DataParallelSync final : public GradientSync {
 public:
  /// groups: outlive this.
  DataParallelSync(dist::ProcessGroups& groups, AdamW& optimizer, DataParallelOptions options);

  void before_forward() override;

  void before_last_backward() override;
  void after_backward() override;
  at::Tensor gradient_norm(const AdamW& optimizer) override;
  void after_step() override;
  std::pair<at::Tensor, at::Tensor> reduce_losses(const at::Tensor& loss, const at::Tensor& aux_loss) override;

 private:
  /// The sum of the squares of every expert's gradients: this rank's experts' summed over its expert group.
  at::Tensor squares_of_every_expert();
  /// This rank's sums of squares toward the norm: {the dense parameters' (its part over the tensor and pipeline
  /// ranks), every expert's (undefined without expert parallelism)}.
  std::pair<at::Tensor, at::Tensor> dense_and_expert_squares(const AdamW& optimizer);
  /// The same from the distributed optimizer's shards, summed over the data-parallel ranks.
  std::pair<at::Tensor, at::Tensor> squares_of_shards();

  dist::ProcessGroups& groups_;
  std::unique_ptr<dist::GradientReducer> reducer_;
  std::unique_ptr<dist::GradientReducer> expert_reducer_;  ///< the experts' share, under expert parallelism
  /// Under expert parallelism, the gradients of the rest and of this rank's experts (and their parts of the
  /// optimizer's flat buffer, where it has one), whose squares the norm sums apart.
  std::vector<at::Tensor> dense_gradients_, expert_gradients_;
  at::Tensor dense_flat_, expert_flat_;
  at::Tensor shared_embedding_;
  std::vector<at::Tensor> uncounted_;         ///< the tensor duplicates, on tensor ranks other than the first
  std::vector<at::Tensor> summed_gradients_;  ///< summed over the tensor group after the backward
  bool counts_shared_embedding_ = true;       ///< false on the last stage: the first stage counts it in the norm
  at::Tensor staging_;  ///< --grad-reduce-in-bf16's buffer where the working copies cannot hold the sums
  GradientShards* shards_ = nullptr;
  bool defer_gathers_ = false;
  std::vector<int64_t> uncounted_indices_;  ///< with shards: the optimizer's indices of what the norm leaves out here
};

}  // namespace graphed::train
