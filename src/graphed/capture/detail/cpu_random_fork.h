// capture/detail/cpu_random_fork.h — the CPU half of RandomStream (capture/random_stream.h), shared by both
// builds: each fork puts a fresh generator, seeded from the stream's seed and the fork's number, in the
// default CPU generator's place and restores the default's state after (no graphs on the CPU: copying is safe).
#pragma once

#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace graphed::capture {
class RandomStream;
}

namespace graphed::capture::detail {

/// The registry of live streams (capture/random_stream.cpp).
void add_stream(RandomStream* stream);
void remove_stream(RandomStream* stream);

inline at::Generator make_cpu_stream_generator(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

/// The seed of a CPU stream's fork number `fork`: each fork starts a generator of its own, so the stream's
/// place is one count (a resumed run continues it on every tensor rank from that count alone).
inline uint64_t cpu_fork_seed(uint64_t seed, uint64_t fork) { return seed ^ (fork * 0x9E3779B97F4A7C15ULL); }

/// Puts a generator seeded `seed` in the default CPU generator's place; returns the default's own state.
inline at::Tensor enter_cpu_fork(uint64_t seed) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  const std::lock_guard<std::mutex> lock(generator.mutex());
  at::Tensor saved = generator.get_state();
  generator.set_state(at::detail::createCPUGenerator(seed).get_state());
  return saved;
}

/// Restores the default CPU generator's own state.
inline void leave_cpu_fork(const at::Tensor& saved) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  const std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(saved);
}

}  // namespace graphed::capture::detail
