// capture/random_stream_cuda.cpp — RandomStream on a CUDA build (capture/random_stream.h). A CUDA stream's
// fork trades generator states with the device's default generator (graphsafe_set_state), which is what a
// capture records against, so forks inside a graph draw from the stream on every replay.
#include "graphed/capture/random_stream.h"

#include <vector>

#include <ATen/cuda/CUDAGeneratorImpl.h>

#include "graphed/capture/detail/cpu_random_fork.h"

namespace graphed::capture {
namespace {

at::DeviceIndex index_of(const at::Device& device) { return device.index() < 0 ? 0 : device.index(); }

at::Generator make_generator(const at::Device& device, uint64_t seed) {
  if (!device.is_cuda()) return detail::make_cpu_stream_generator(seed);
  at::Generator generator = at::cuda::detail::createCUDAGenerator(index_of(device));
  generator.set_current_seed(seed);
  return generator;
}

}  // namespace

RandomStream::RandomStream(const at::Device& device, uint64_t seed, std::string name)
    : device_(device), name_(std::move(name)), seed_(seed), generator_(make_generator(device, seed)) {
  detail::add_stream(this);
}

RandomStream::~RandomStream() { detail::remove_stream(this); }

uint64_t RandomStream::offset() const {
  if (!device_.is_cuda()) return forks_;
  at::Generator generator = generator_;  // a handle on the same generator (mutex() is not const)
  const std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CUDAGeneratorImpl>()->philox_offset_per_thread();
}

void RandomStream::set_offset(uint64_t offset) {
  if (!device_.is_cuda()) {
    forks_ = offset;
    return;
  }
  const std::lock_guard<std::mutex> lock(generator_.mutex());
  generator_.get<at::CUDAGeneratorImpl>()->set_philox_offset_per_thread(offset);
}

at::Tensor RandomStream::state() const {
  if (!device_.is_cuda()) return at::tensor(std::vector<int64_t>{static_cast<int64_t>(forks_)});
  return generator_.get_state();
}

void RandomStream::restore(const at::Tensor& state) {
  if (!device_.is_cuda()) {
    forks_ = static_cast<uint64_t>(state.item<int64_t>());
    return;
  }
  at::Generator generator = generator_;
  generator.set_state(state);
}

RandomStream::Fork::Fork(RandomStream& stream) : stream_(stream) {
  if (!stream.device_.is_cuda()) {
    saved_state_ = detail::enter_cpu_fork(detail::cpu_fork_seed(stream.seed_, stream.forks_++));
    return;
  }
  at::Generator generator = at::cuda::detail::getDefaultCUDAGenerator(index_of(stream.device_));
  saved_ = generator.graphsafe_get_state();  // the default's own state object
  generator.graphsafe_set_state(stream.generator_.graphsafe_get_state());
}

RandomStream::Fork::~Fork() {
  if (!stream_.device_.is_cuda()) {
    detail::leave_cpu_fork(saved_state_);
    return;
  }
  at::Generator generator = at::cuda::detail::getDefaultCUDAGenerator(index_of(stream_.device_));
  generator.graphsafe_set_state(saved_);
}

}  // namespace graphed::capture
