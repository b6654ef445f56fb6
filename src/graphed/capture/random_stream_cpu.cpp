// capture/random_stream_cpu.cpp — RandomStream on a CPU build: CPU streams only (capture/random_stream.h).
#include "graphed/capture/random_stream.h"

#include <vector>

#include "graphed/capture/detail/cpu_random_fork.h"
#include "graphed/util/error.h"

namespace graphed::capture {

RandomStream::RandomStream(const at::Device& device, uint64_t seed, std::string name)
    : device_(device), name_(std::move(name)), seed_(seed), generator_(detail::make_cpu_stream_generator(seed)) {
  GRAPHED_INTERNAL_ASSERT(device.is_cpu(), "a random stream on ", device.str(), " in a CPU build");
  detail::add_stream(this);
}

RandomStream::~RandomStream() { detail::remove_stream(this); }

uint64_t RandomStream::offset() const { return forks_; }
void RandomStream::set_offset(uint64_t offset) { forks_ = offset; }
at::Tensor RandomStream::state() const { return at::tensor(std::vector<int64_t>{static_cast<int64_t>(forks_)}); }
void RandomStream::restore(const at::Tensor& state) { forks_ = static_cast<uint64_t>(state.item<int64_t>()); }

RandomStream::Fork::Fork(RandomStream& stream)
    : stream_(stream), saved_state_(detail::enter_cpu_fork(detail::cpu_fork_seed(stream.seed_, stream.forks_++))) {}
RandomStream::Fork::~Fork() { detail::leave_cpu_fork(saved_state_); }

}  // namespace graphed::capture
