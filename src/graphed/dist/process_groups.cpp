// dist/process_groups.cpp — see dist/process_groups.h.
#include "graphed/dist/process_groups.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "graphed/dist/detail/backend.h"
#include "graphed/util/error.h"

namespace graphed::dist {
namespace {

std::string seconds(std::chrono::milliseconds timeout) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) + " s";
}

/// The rendezvous store: torchrun's agent hosts it (every rank a client, keys under the attempt's
/// prefix); a hand-written launch has rank 0 host it.
c10::intrusive_ptr<c10d::Store> open_store(const LaunchEnvironment& environment, std::chrono::milliseconds timeout,
                                           bool server) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(environment.master_port);
  options.isServer = server;
  options.numWorkers = static_cast<std::size_t>(environment.world_size);
  options.waitWorkers = false;
  options.timeout = timeout;
  const std::string where = environment.master_address + ":" + std::to_string(environment.master_port);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(environment.master_address, options);
  } catch (const std::exception& error) {
    std::string reason = error.what();
    reason = reason.substr(0, reason.find('\n'));
    throw DistributedError("rank " + std::to_string(environment.rank) + " could not " + (server ? "host" : "reach") +
                           " the rendezvous at MASTER_ADDR:MASTER_PORT = " + where + " within " + seconds(timeout) +
                           " (" + reason + "); fix: " +
                           (server ? "pick a free MASTER_PORT"
                                   : "check MASTER_ADDR and MASTER_PORT, that rank 0 started, and that "
                                     "the port is open between the machines"));
  }
  if (environment.agent_store) {
    store =
        c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(environment.restart_count), store);
  }
  return c10::make_intrusive<c10d::PrefixStore>("graphed", store);
}

/// Group names tell groups of one kind apart by the coordinates their members share: with tensor
/// parallelism, the tensor rank too.
std::string tensor_suffix(const ParallelLayout& layout) {
  return layout.tensor_size > 1 ? "/tensor-" + std::to_string(layout.tensor_rank()) : "";
}

}  // namespace

ProcessGroups::ProcessGroups(const LaunchEnvironment& environment, const ParallelLayout& layout,
                             const at::Device& device, std::chrono::milliseconds timeout)
    : environment_(environment), layout_(layout), device_(device), timeout_(timeout) {
  store_ = open_store(environment_, timeout_, environment_.rank == 0 && !environment_.agent_store);
  std::vector<int64_t> everyone;
  for (int64_t r = 0; r < layout_.world_size; ++r) everyone.push_back(r);
  world_ = make_group("world", everyone, timeout_);
  const std::string tensor = tensor_suffix(layout_);
  data_ =
      make_group("data-parallel/" + std::to_string(layout_.pipeline_rank()) + tensor, layout_.data_group(), timeout_);
  pipeline_ =
      make_group("pipeline/" + std::to_string(layout_.data_rank()) + tensor, layout_.pipeline_group(), timeout_);
  if (layout_.tensor_size > 1) {
    tensor_ = make_tensor_group("tensor", timeout_);
  }
  if (layout_.expert_size > 1) {  // named by the expert coordinates their members share
    const std::string stage = std::to_string(layout_.pipeline_rank()) + "/";
    const std::string expert_tensor =
        layout_.expert_tensor_size > 1 ? "/tensor-" + std::to_string(layout_.expert_tensor_rank()) : "";
    expert_ = make_group("expert-parallel/" + stage + std::to_string(layout_.expert_data_rank()) + expert_tensor,
                         layout_.expert_group(), timeout_);
    expert_data_ = make_group("expert-data-parallel/" + stage + std::to_string(layout_.expert_rank()) + expert_tensor,
                              layout_.expert_data_group(), timeout_);
  }
  if (layout_.is_pipelined() && (layout_.holds_embedding() || layout_.holds_loss())) {
    const auto group = layout_.pipeline_group();
    embedding_ = make_group("embedding/" + std::to_string(layout_.data_rank()) + tensor, {group.front(), group.back()},
                            timeout_);
  }
  // Every link now, in one order on every rank: a Gloo group connects in its constructor, and two ranks
  // building their links in different orders would wait for each other.
  const int64_t boundaries = layout_.pipeline_size * layout_.chunks - 1;
  for (int64_t boundary = 0; boundary < boundaries; ++boundary) {
    const int64_t from = boundary % layout_.pipeline_size;
    const int64_t to = (boundary + 1) % layout_.pipeline_size;
    if (layout_.pipeline_rank() != from && layout_.pipeline_rank() != to) continue;
    for (const auto direction : {LinkDirection::kForward, LinkDirection::kBackward}) link(boundary, direction);
  }
}

ProcessGroups::~ProcessGroups() = default;

std::unique_ptr<Communicator> ProcessGroups::make_group(const std::string& name, const std::vector<int64_t>& ranks,
                                                        std::chrono::milliseconds timeout) {
  int64_t rank = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == layout_.rank) rank = static_cast<int64_t>(i);
  }
  GRAPHED_INTERNAL_ASSERT(rank >= 0, "rank ", layout_.rank, " is not in group ", name);
  const auto store = c10::make_intrusive<c10d::PrefixStore>(name, store_);
  const auto size = static_cast<int64_t>(ranks.size());
  auto backend = device_.is_cuda() ? detail::make_nccl_backend(store, rank, size, timeout, device_)
                                   : detail::make_gloo_backend(store, rank, size, timeout, environment_.master_address);
  return std::make_unique<Communicator>(std::move(backend), name, ranks, layout_.rank);
}

std::unique_ptr<Communicator> ProcessGroups::make_tensor_group(const std::string& purpose,
                                                               std::chrono::milliseconds timeout) {
  GRAPHED_INTERNAL_ASSERT(layout_.tensor_size > 1, "a ", purpose, " group asked of a run with tensor size 1");
  return make_group(purpose + "/" + std::to_string(layout_.pipeline_rank()) + "/" + std::to_string(layout_.data_rank()),
                    layout_.tensor_group(), timeout);
}

Communicator& ProcessGroups::tensor() {
  GRAPHED_INTERNAL_ASSERT(tensor_ != nullptr, "a tensor-parallel group asked of a run with tensor size 1");
  return *tensor_;
}

Communicator& ProcessGroups::expert() {
  GRAPHED_INTERNAL_ASSERT(expert_ != nullptr, "an expert-parallel group asked of a run with expert size 1");
  return *expert_;
}

Communicator& ProcessGroups::expert_data() {
  GRAPHED_INTERNAL_ASSERT(expert_data_ != nullptr, "an expert-data-parallel group asked of a run with expert size 1");
  return *expert_data_;
}

Communicator& ProcessGroups::link(int64_t boundary, LinkDirection direction) {
  const auto key = std::make_pair(boundary, static_cast<int>(direction));
  auto found = links_.find(key);
  if (found != links_.end()) return *found->second;
  const int64_t stages = layout_.pipeline_size;
  const auto group = layout_.pipeline_group();
  const std::vector<int64_t> ends{group.at(static_cast<std::size_t>(boundary % stages)),
                                  group.at(static_cast<std::size_t>((boundary + 1) % stages))};
  const std::string tensor = tensor_suffix(layout_);
  const std::string name = "pipeline-link/" + std::to_string(layout_.data_rank()) + tensor + "/" +
                           std::to_string(boundary) + (direction == LinkDirection::kForward ? "/forward" : "/backward");
  return *links_.emplace(key, make_group(name, ends, timeout_)).first->second;
}

void ProcessGroups::shutdown() {
  for (auto& entry : links_) entry.second->shutdown();
  for (auto* group : {&embedding_, &expert_data_, &expert_, &pipeline_, &data_, &world_}) {
    if (*group) (*group)->shutdown();
  }
}

c10::intrusive_ptr<c10d::Store> ProcessGroups::connect_store() const {
  return open_store(environment_, timeout_, /*server=*/false);
}

}  // namespace graphed::dist
