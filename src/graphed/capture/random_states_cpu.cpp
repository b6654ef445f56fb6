// capture/random_states_cpu.cpp — capture/random_states.h for builds without CUDA (GRAPHED_CUDA=0).
#include "graphed/capture/random_states.h"

#include <ATen/CPUGeneratorImpl.h>

namespace graphed::capture {

uint64_t cuda_random_offset(const at::Device&) { return 0; }

std::vector<std::pair<std::string, at::Tensor>> rng_states(const at::Device&) {
  return {{"cpu", at::detail::getDefaultCPUGenerator().get_state()}};
}

void restore_rng_states(const at::Device&, const std::map<std::string, at::Tensor>& states) {
  const auto cpu = states.find("cpu");
  if (cpu != states.end()) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(cpu->second);
  }
}

}  // namespace graphed::capture
