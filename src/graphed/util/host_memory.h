// util/host_memory.h — how much memory the host has left for a run (MemAvailable of /proc/meminfo),
// for the estimate a run is checked against before it starts; and how freed host memory is kept for
// the next iteration of a run on the CPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace graphed {

/// MemAvailable of /proc/meminfo in bytes; nullopt when it cannot be read.
std::optional<int64_t> host_available_memory_bytes();

/// MemAvailable parsed from the text of /proc/meminfo ("MemAvailable:   23456789 kB").
std::optional<int64_t> available_from_meminfo(const std::string& meminfo);

/// For runs on the CPU: freed blocks stay in the process for reuse instead of going back to the
/// system. glibc serves every allocation above 32 MB with mmap and unmaps it when freed, so a CPU
/// iteration that makes the same large tensors every time (the logits of a 50,304-token vocabulary,
/// their softmax and gradient: 100 MB each for 512 tokens) paid page faults and page zeroing for each
/// of them again: 40% of `train --preset tiny --vocab-size 50304`'s time on the 2-core machine.
/// The process's memory stays at its peak, as LibTorch's CUDA caching allocator keeps GPU memory.
void keep_freed_host_memory();

}  // namespace graphed
