// dist/peer_collectives.h — the collectives of a tensor-parallel inference engine: the small all-reduces of a
// decode step take the one-shot peer-memory kernel (kernels/peer_all_reduce_ops.h), whose one launch costs
// less than a library collective; everything else, and every group whose GPUs cannot map each other's
// memory, takes the group's own (dist/tensor_collectives.h). One rank makes its calls on one stream, in the
// same order as the others (each call's flags follow the last).
#pragma once

#include <memory>

#include <ATen/ATen.h>

#include "graphed/dist/communicator.h"
#include "graphed/dist/tensor_collectives.h"
#include "graphed/kernels/peer_all_reduce_ops.h"
#include "graphed/model/tensor_parallel.h"

namespace graphed::dist {

/// The largest tensor (bytes) the peer all-reduce takes: the rows of a serving step's decode batch.
constexpr int64_t kPeerAllReduceCapacity = int64_t{1} << 20;

/// All-reduces that fit the peer kernel take it; the rest, and the other collectives, take the group's.
class PeerTensorCollectives final : public model::TensorCollectives {
 public:
  PeerTensorCollectives(Communicator& group, std::unique_ptr<kernels::PeerAllReduce> peer);
  ~PeerTensorCollectives() override;
  int64_t size() const override { return group_.size(); }
  int64_t rank() const override { return group_.rank(); }
  at::Tensor all_reduce_sum(const at::Tensor& tensor) override;
  at::Tensor all_gather(const at::Tensor& tensor, int64_t dim) override { return group_.all_gather(tensor, dim); }
  at::Tensor reduce_scatter_sum(const at::Tensor& tensor, int64_t dim) override {
    return group_.reduce_scatter_sum(tensor, dim);
  }

 private:
  GroupTensorCollectives group_;
  std::unique_ptr<kernels::PeerAllReduce> peer_;
};

/// Collectives over `group` (which outlives them) for an engine on `device`. With use_peer_memory, every rank
/// maps every other's peer area and all agree before it is used; where one cannot (no peer access, no memory
/// for its area, a rank count other than 2, 4 or 8), all fall back to the group's collectives and that rank
/// warns why. Every rank of the group calls this together.
std::shared_ptr<model::TensorCollectives> make_inference_collectives(Communicator& group, const at::Device& device,
                                                                     bool use_peer_memory);

}  // namespace graphed::dist
