// dist/peer_collectives.cpp — see dist/peer_collectives.h. The ranks swap their area handles with one
// all-gather, map each other's areas, and agree (a second all-gather) that every rank could.
#include "graphed/dist/peer_collectives.h"

#include <string>
#include <utility>
#include <vector>

#include "graphed/util/logging.h"

namespace graphed::dist {
namespace {

/// Every rank's bytes (the same length on each), in group order.
std::vector<std::vector<uint8_t>> gather_bytes(Communicator& group, const std::vector<uint8_t>& bytes,
                                               const at::Device& device) {
  at::Tensor own = at::tensor(std::vector<int64_t>(bytes.begin(), bytes.end()), at::kLong).to(device);
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < group.size(); ++r) parts.push_back(at::empty_like(own));
  group.all_gather(parts, own).wait();
  std::vector<std::vector<uint8_t>> gathered;
  for (const at::Tensor& part : parts) {
    const at::Tensor host = part.cpu();
    const int64_t* values = host.data_ptr<int64_t>();
    gathered.emplace_back(values, values + host.numel());
  }
  return gathered;
}

}  // namespace

PeerTensorCollectives::PeerTensorCollectives(Communicator& group, std::unique_ptr<kernels::PeerAllReduce> peer)
    : group_(group), peer_(std::move(peer)) {}

PeerTensorCollectives::~PeerTensorCollectives() = default;

at::Tensor PeerTensorCollectives::all_reduce_sum(const at::Tensor& tensor) {
  return peer_->fits(tensor) ? peer_->sum(tensor) : group_.all_reduce_sum(tensor);
}

std::shared_ptr<model::TensorCollectives> make_inference_collectives(Communicator& group, const at::Device& device,
                                                                     bool use_peer_memory) {
  std::unique_ptr<kernels::PeerAllReduce> peer;
  if (use_peer_memory) peer = kernels::make_peer_all_reduce(group.rank(), group.size(), kPeerAllReduceCapacity, device);
  if (!peer) return std::make_shared<GroupTensorCollectives>(group);  // alike on every rank: the build and device
  const std::string failure = peer->connect(gather_bytes(group, peer->handle(), device));
  int failures = 0;
  for (const std::vector<uint8_t>& flag : gather_bytes(group, {static_cast<uint8_t>(failure.empty() ? 0 : 1)}, device)) {
    failures += flag[0];
  }
  if (failures > 0) {
    if (!failure.empty()) log_warn("rank " + std::to_string(group.rank()) + ": the peer all-reduce is off (" + failure +
                                   "); the tensor-parallel sums take " + group.name() + "'s collectives");
    return std::make_shared<GroupTensorCollectives>(group);
  }
  if (group.rank() == 0) {
    log_info("tensor-parallel sums of up to " + std::to_string(kPeerAllReduceCapacity >> 10) +
             " KiB take the one-shot peer-memory all-reduce");
  }
  return std::make_shared<PeerTensorCollectives>(group, std::move(peer));
}

}  // namespace graphed::dist
