// capture/random_states_cuda.cpp — capture/random_states.h for CUDA builds.
#include "graphed/capture/random_states.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>

#include <mutex>

#include "graphed/capture/random_stream.h"

namespace graphed::capture {

uint64_t cuda_random_offset(const at::Device& device) {
  if (!device.is_cuda()) return 0;
  at::Generator generator = at::cuda::detail::getDefaultCUDAGenerator(device.index() < 0 ? 0 : device.index());
  uint64_t offset = 0;
  {
    const std::lock_guard<std::mutex> lock(generator.mutex());
    offset = generator.get<at::CUDAGeneratorImpl>()->philox_offset_per_thread();
  }
  for (const RandomStream* stream : random_streams(device)) offset += stream->offset();  // model-parallel draws
  return offset;
}

std::vector<std::pair<std::string, at::Tensor>> rng_states(const at::Device& device) {
  std::vector<std::pair<std::string, at::Tensor>> states{{"cpu", at::detail::getDefaultCPUGenerator().get_state()}};
  if (device.is_cuda()) {
    states.emplace_back("cuda",
                        at::cuda::detail::getDefaultCUDAGenerator(device.index() < 0 ? 0 : device.index()).get_state());
  }
  return states;
}

void restore_rng_states(const at::Device& device, const std::map<std::string, at::Tensor>& states) {
  const auto cpu = states.find("cpu");
  if (cpu != states.end()) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(cpu->second);
  }
  const auto cuda = states.find("cuda");
  if (device.is_cuda() && cuda != states.end()) {
    at::Generator generator = at::cuda::detail::getDefaultCUDAGenerator(device.index() < 0 ? 0 : device.index());
    generator.set_state(cuda->second);
  }
}

}  // namespace graphed::capture
