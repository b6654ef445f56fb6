// capture/random_states.h — the default generators' states for checkpoints, and the CUDA Philox offset that
// tells whether work drew random numbers (the default generator's and every random stream's), with one CUDA
// implementation (random_states_cuda.cpp) and one CPU implementation (random_states_cpu.cpp).
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace graphed::capture {

/// The states of the default CPU generator and, on a CUDA device, its default CUDA generator, by
/// name ("cpu", "cuda"), as uint8 tensors for checkpoints.
std::vector<std::pair<std::string, at::Tensor>> rng_states(const at::Device& device);
/// The default CUDA generator's Philox offset plus every random stream's (capture/random_stream.h): it
/// advances whenever work draws random numbers (0 on the CPU).
uint64_t cuda_random_offset(const at::Device& device);
/// Restores states saved by rng_states(); a missing name is left alone.
void restore_rng_states(const at::Device& device, const std::map<std::string, at::Tensor>& states);

}  // namespace graphed::capture
