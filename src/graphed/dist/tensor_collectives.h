// dist/tensor_collectives.h — model::TensorCollectives over a rank's tensor-parallel group: what the model's
// tensor-parallel regions (model/tensor_parallel.h) call, carried out by the group's Communicator (NCCL on
// GPUs: the current stream waits, the host does not, so the calls can be captured; Gloo on CPUs).
#pragma once

#include "graphed/dist/communicator.h"
#include "graphed/model/tensor_parallel.h"

namespace graphed::dist {

class GroupTensorCollectives final : public model::TensorCollectives {
 public:
  /// `group` outlives this object (it belongs to the run's ProcessGroups).
  explicit GroupTensorCollectives(Communicator& group) : group_(group) {}
  int64_t size() const override { return group_.size(); }
  int64_t rank() const override { return group_.rank(); }
  at::Tensor all_reduce_sum(const at::Tensor& tensor) override;
  at::Tensor all_gather(const at::Tensor& tensor, int64_t dim) override;
  at::Tensor reduce_scatter_sum(const at::Tensor& tensor, int64_t dim) override;

 private:
  Communicator& group_;
};

}  // namespace graphed::dist
