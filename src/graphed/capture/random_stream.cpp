// capture/random_stream.cpp — the registry of live random streams (capture/random_stream.h); the generator
// work itself is in random_stream_cpu.cpp and random_stream_cuda.cpp.
#include "graphed/capture/random_stream.h"

#include <algorithm>
#include <mutex>

#include "graphed/capture/random_states.h"

namespace graphed::capture {
namespace detail {

std::mutex& streams_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::vector<RandomStream*>& live_streams() {
  static std::vector<RandomStream*> streams;
  return streams;
}

void add_stream(RandomStream* stream) {
  const std::lock_guard<std::mutex> lock(streams_mutex());
  live_streams().push_back(stream);
}

void remove_stream(RandomStream* stream) {
  const std::lock_guard<std::mutex> lock(streams_mutex());
  auto& streams = live_streams();
  streams.erase(std::remove(streams.begin(), streams.end(), stream), streams.end());
}

}  // namespace detail

std::vector<RandomStream*> random_streams(const at::Device& device) {
  const std::lock_guard<std::mutex> lock(detail::streams_mutex());
  std::vector<RandomStream*> found;
  for (RandomStream* stream : detail::live_streams()) {
    if (stream->device().type() == device.type()) found.push_back(stream);
  }
  return found;
}

std::vector<std::pair<std::string, at::Tensor>> random_stream_states(const at::Device& device) {
  std::vector<std::pair<std::string, at::Tensor>> states;
  for (RandomStream* stream : random_streams(device)) states.emplace_back(stream->name(), stream->state());
  return states;
}

void restore_random_stream_states(const at::Device& device, const std::map<std::string, at::Tensor>& states) {
  for (RandomStream* stream : random_streams(device)) {
    const auto found = states.find(stream->name());
    if (found != states.end()) stream->restore(found->second);
  }
}

RandomStateSnapshot::RandomStateSnapshot(const at::Device& device) : device_(device) {
  for (auto& [name, state] : rng_states(device)) defaults_.emplace(name, state);
  for (auto& [name, state] : random_stream_states(device)) streams_.emplace(name, state);
}

void RandomStateSnapshot::restore() const {
  restore_rng_states(device_, defaults_);
  restore_random_stream_states(device_, streams_);
}

}  // namespace graphed::capture
