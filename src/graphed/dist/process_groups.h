// dist/process_groups.h — the rendezvous and every process group a rank belongs to: the world, its
// data-parallel group (gradient all-reduce), its pipeline (loss and norm reductions), its tensor-parallel
// group (the layers' collectives and the gradient norm), with expert parallelism its expert group (the
// tokens' all-to-all) and expert-data group (the experts' gradients), the embedding
// group of the pipeline's first and last stage (tied embeddings), and one two-rank link per pipeline
// boundary and direction for activations and gradients. A link carries traffic one way only, so a
// send never queues behind a send the other way (no home-made ordering, no deadlock on NCCL's
// per-pair stream). NCCL on CUDA devices, Gloo on the CPU; the store is torchrun's (agent store) or
// rank 0's TCPStore.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "graphed/dist/communicator.h"
#include "graphed/dist/launch_environment.h"
#include "graphed/dist/parallel_layout.h"

namespace graphed::dist {

/// Which way a pipeline link carries tensors: activations to the next stage, gradients to the previous.
enum class LinkDirection { kForward, kBackward };

class ProcessGroups {
 public:
  /// Connects to the rendezvous (within `timeout`) and creates this rank's groups on `device`. Throws
  /// DistributedError for an unreachable or busy rendezvous, or a backend missing from this build.
  ProcessGroups(const LaunchEnvironment& environment, const ParallelLayout& layout, const at::Device& device,
                std::chrono::milliseconds timeout);
  ~ProcessGroups();

  const ParallelLayout& layout() const { return layout_; }
  const LaunchEnvironment& environment() const { return environment_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  Communicator& world() { return *world_; }
  Communicator& data() { return *data_; }
  Communicator& pipeline() { return *pipeline_; }
  /// The ranks that share each layer's weights; only with tensor size > 1.
  Communicator& tensor();
  /// The ranks that share out the experts and exchange tokens; only with expert size > 1.
  Communicator& expert();
  /// The ranks holding the same experts (they average the experts' gradients); only with expert size > 1, where
  /// it may have one member.
  Communicator& expert_data();
  /// The first and last stage of this rank's pipeline; null when this rank is neither, or with one stage.
  Communicator* embedding() { return embedding_.get(); }
  /// The link over pipeline boundary b (between virtual stages b and b + 1) in one direction; this rank
  /// must be one of its two ends.
  Communicator& link(int64_t boundary, LinkDirection direction);
  /// Shuts every backend down cleanly (the end of a good run; LibTorch 2.x, a no-op on 1.13).
  void shutdown();
  /// A second connection to the rendezvous store, for the rank monitor's thread.
  c10::intrusive_ptr<c10d::Store> connect_store() const;
  /// One more group over this rank's tensor-parallel ranks (tensor size > 1), for a purpose of the caller's
  /// (`purpose`: the same on every member, used for nothing else) and with its own `timeout` for each operation:
  /// serving's control group waits as long as the server is idle. Every member makes it at the same point among
  /// the groups it makes; the caller owns it (and shuts it down).
  std::unique_ptr<Communicator> make_tensor_group(const std::string& purpose, std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<Communicator> make_group(const std::string& name, const std::vector<int64_t>& ranks,
                                           std::chrono::milliseconds timeout);

  LaunchEnvironment environment_;
  ParallelLayout layout_;
  at::Device device_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<Communicator> world_, data_, pipeline_, tensor_, expert_, expert_data_, embedding_;
  std::map<std::pair<int64_t, int>, std::unique_ptr<Communicator>> links_;
};

}  // namespace graphed::dist
