// dist/peer_collectives.cpp — see dist/peer_collectives.h. The ranks swap their area handles with one
// all-gather, map each other's areas, and agree (a second all-gather) that every rank could.
#include "graphed/dist/peer_collectives.h"

#include <string>
#include <utility>
#include <vector>

#include "graphed/kernels/peer_all_reduce.h"
#include "graphed/util/error.h"
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
  if (!use_peer_memory || !kernels::peer_all_reduce_built() || !device.is_cuda()) {
    return std::make_shared<GroupTensorCollectives>(group);  // alike on every rank: the flag, build and device
  }
  // A rank that cannot make its area still takes part in both all-gathers (the others would wait forever).
  std::unique_ptr<kernels::PeerAllReduce> peer;
  std::string failure;
  try {
    peer = kernels::make_peer_all_reduce(group.rank(), group.size(), kPeerAllReduceCapacity, device);
    if (!peer) failure = std::to_string(group.size()) + " ranks (it takes 2, 4 or 8)";
  } catch (const Error& error) {
    failure = error.what();
  }
  const std::vector<uint8_t> handle = peer ? peer->handle() : std::vector<uint8_t>(kernels::kPeerHandleBytes, 0);
  const std::vector<std::vector<uint8_t>> handles = gather_bytes(group, handle, device);
  if (peer) failure = peer->connect(handles);
  int failures = 0;
  for (const std::vector<uint8_t>& flag :
       gather_bytes(group, {static_cast<uint8_t>(failure.empty() ? 0 : 1)}, device)) {
    failures += flag[0];
  }
  if (failures > 0) {
    if (!failure.empty())
      log_warn("rank " + std::to_string(group.rank()) + ": the peer all-reduce is off (" + failure +
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
