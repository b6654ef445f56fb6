// util/host_memory.h — how much memory the host has left for a run (MemAvailable of /proc/meminfo),
// for the estimate a run is checked against before it starts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace graphed {

/// MemAvailable of /proc/meminfo in bytes; nullopt when it cannot be read.
std::optional<int64_t> host_available_memory_bytes();

/// MemAvailable parsed from the text of /proc/meminfo ("MemAvailable:   23456789 kB").
std::optional<int64_t> available_from_meminfo(const std::string& meminfo);

}  // namespace graphed
