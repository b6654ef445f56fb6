// dist/expert_collectives.h — model::ExpertCollectives over a rank's expert-parallel group: the MoE layers'
// token exchange (model/expert_parallel.h), carried out by the group's Communicator (NCCL on GPUs, Gloo on CPUs).
#pragma once

#include <vector>

#include "graphed/dist/communicator.h"
#include "graphed/model/expert_parallel.h"

namespace graphed::dist {

class GroupExpertCollectives final : public model::ExpertCollectives {
 public:
  /// `group` outlives this object (it belongs to the run's ProcessGroups).
  explicit GroupExpertCollectives(Communicator& group) : group_(group) {}
  int64_t size() const override { return group_.size(); }
  int64_t rank() const override { return group_.rank(); }
  at::Tensor all_to_all(const at::Tensor& input, const std::vector<int64_t>& output_splits,
                        const std::vector<int64_t>& input_splits) override;
  at::Tensor all_gather(const at::Tensor& tensor) override;

 private:
  Communicator& group_;
};

}  // namespace graphed::dist
