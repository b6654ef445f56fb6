// dist/launch_environment.cpp — see dist/launch_environment.h.
#include "graphed/dist/launch_environment.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "graphed/util/error.h"

namespace graphed::dist {
namespace {

/// The integer value of `name`, or nullopt when unset; throws when set but not an integer in range.
std::optional<int64_t> integer_variable(const std::function<const char*(const char*)>& lookup, const char* name,
                                        int64_t low, int64_t high) {
  const char* text = lookup(name);
  if (text == nullptr) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || value < low || value > high) {
    throw DistributedError(std::string(name) + "='" + text + "' is not an integer between " + std::to_string(low) +
                           " and " + std::to_string(high) + "; fix: launch with torchrun, which sets it, or set it " +
                           "to a value in that range");
  }
  return value;
}

int64_t required_integer(const std::function<const char*(const char*)>& lookup, const char* name, int64_t low,
                         int64_t high, int64_t world_size) {
  const auto value = integer_variable(lookup, name, low, high);
  if (!value) {
    throw DistributedError("WORLD_SIZE=" + std::to_string(world_size) + " asks for several processes, but " + name +
                           " is not set; fix: launch with torchrun (torchrun --nproc-per-node " +
                           std::to_string(world_size) + " --no-python graphed train ...), which sets RANK, " +
                           "LOCAL_RANK, MASTER_ADDR and MASTER_PORT, or set " + name + " in every process");
  }
  return *value;
}

}  // namespace

std::string LaunchEnvironment::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(world_size);
}

LaunchEnvironment parse_launch_environment(const std::function<const char*(const char*)>& lookup) {
  LaunchEnvironment environment;
  environment.world_size = integer_variable(lookup, "WORLD_SIZE", 1, 1 << 20).value_or(1);
  if (!environment.is_distributed()) return environment;
  const int64_t world = environment.world_size;
  environment.rank = required_integer(lookup, "RANK", 0, world - 1, world);
  environment.local_rank = integer_variable(lookup, "LOCAL_RANK", 0, world - 1).value_or(environment.rank);
  environment.local_world_size = integer_variable(lookup, "LOCAL_WORLD_SIZE", 1, world).value_or(world);
  const char* address = lookup("MASTER_ADDR");
  if (address == nullptr || *address == '\0') {
    throw DistributedError("WORLD_SIZE=" + std::to_string(world) + " asks for several processes, but MASTER_ADDR " +
                           "(the host of the rendezvous) is not set; fix: launch with torchrun, or set MASTER_ADDR " +
                           "to rank 0's host name or address (127.0.0.1 on one machine) in every process");
  }
  environment.master_address = address;
  environment.master_port = required_integer(lookup, "MASTER_PORT", 1, 65535, world);
  const char* agent = lookup("TORCHELASTIC_USE_AGENT_STORE");
  environment.agent_store = agent != nullptr && std::string(agent) == "True";
  environment.restart_count = integer_variable(lookup, "TORCHELASTIC_RESTART_COUNT", 0, 1 << 20).value_or(0);
  return environment;
}

LaunchEnvironment read_launch_environment() {
  return parse_launch_environment([](const char* name) { return std::getenv(name); });
}

}  // namespace graphed::dist
