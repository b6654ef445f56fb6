// dist/launch_environment.h — who this process is in a multi-process launch, read from the variables
// torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), or that a
// hand-written launcher sets the same way. No torch code: checked before anything is built.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace graphed::dist {

struct LaunchEnvironment {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;        ///< the GPU this process uses
  int64_t local_world_size = 1;  ///< processes on this node
  std::string master_address;    ///< the rendezvous store's host
  int64_t master_port = 0;
  /// torchrun's agent hosts the store (TORCHELASTIC_USE_AGENT_STORE=True): every rank is a client and
  /// the keys live under /worker/attempt_<restart_count>. Otherwise rank 0 hosts it.
  bool agent_store = false;
  int64_t restart_count = 0;

  bool is_distributed() const { return world_size > 1; }
  /// "rank 1 of 2"
  std::string describe() const;
};

/// Reads the launch variables through `lookup` (nullptr = unset). WORLD_SIZE unset or 1: one process,
/// nothing else is read. Throws DistributedError for a variable that is missing or malformed, naming
/// it, its value and what to set.
LaunchEnvironment parse_launch_environment(const std::function<const char*(const char*)>& lookup);
/// parse_launch_environment over the process environment.
LaunchEnvironment read_launch_environment();

}  // namespace graphed::dist
