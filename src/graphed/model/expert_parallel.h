// model/expert_parallel.h — expert parallelism as the model sees it (Megatron's --expert-model-parallel-size):
// the collectives a rank needs over its expert group (dist/ implements them; the model only calls them), the
// all-to-all as an autograd function (Megatron's _AllToAll: the backward is the same exchange the other way),
// and ExpertParallel, what an MoE layer holds: its group, or one rank, where every expert is local.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::model {

class ExpertCollectives {
 public:
  virtual ~ExpertCollectives() = default;
  virtual int64_t size() const = 0;
  virtual int64_t rank() const = 0;
  /// Rows of `input` to every rank and back: input_splits[r] rows (in rank order) go to rank r, and the result
  /// holds output_splits[r] rows from each rank r, in rank order. Empty splits mean equal parts.
  virtual at::Tensor all_to_all(const at::Tensor& input, const std::vector<int64_t>& output_splits,
                                const std::vector<int64_t>& input_splits) = 0;
  /// Every rank's `tensor` (the same shape on each), stacked in rank order: [size, ...].
  virtual at::Tensor all_gather(const at::Tensor& tensor) = 0;
};

/// Forward: the all-to-all with these splits; backward: the gradient sent back the other way (splits swapped).
at::Tensor all_to_all_region(const at::Tensor& input, ExpertCollectives& collectives,
                             std::vector<int64_t> output_splits, std::vector<int64_t> input_splits);

/// A layer's expert group, chosen once when the model is split. With one rank (the default) the layer holds
/// every expert and nothing is exchanged.
class ExpertParallel {
 public:
  ExpertParallel() = default;
  /// collectives: the group (outlives the model's steps); null means one rank.
  explicit ExpertParallel(std::shared_ptr<ExpertCollectives> collectives) : collectives_(std::move(collectives)) {}

  int64_t size() const { return collectives_ ? collectives_->size() : 1; }
  int64_t rank() const { return collectives_ ? collectives_->rank() : 0; }
  /// The experts this rank holds of `experts`: [first_expert, first_expert + local_experts), Megatron's
  /// contiguous assignment.
  int64_t local_experts(int64_t experts) const { return experts / size(); }
  int64_t first_expert(int64_t experts) const { return rank() * local_experts(experts); }
  /// Rows to and from the other ranks (all_to_all_region).
  at::Tensor exchange(const at::Tensor& rows, std::vector<int64_t> output_splits,
                      std::vector<int64_t> input_splits) const;
  /// Every rank's `counts` stacked [size, ...] (no gradient): how many rows each rank sends where.
  at::Tensor gather(const at::Tensor& counts) const;

 private:
  std::shared_ptr<ExpertCollectives> collectives_;
};

}  // namespace graphed::model
