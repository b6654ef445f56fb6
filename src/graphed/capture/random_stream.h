// capture/random_stream.h — a second random stream beside a device's default generator: Megatron's
// model-parallel RNG (its CudaRNGStatesTracker fork). Work inside a Fork draws from the stream; the default
// generator continues as if that work never ran. On CUDA the swap is graph-safe (the generators' states
// trade places, as torch's graphsafe_set_state does), every graph captured while the stream lives registers
// it (CudaGraph::capture), so each replay draws new numbers, and its draws count in cuda_random_offset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::capture {

class RandomStream {
 public:
  /// A stream on `device` (its own generator: Philox on CUDA, as the default) seeded with `seed`; `name`
  /// tells streams apart in saved states.
  RandomStream(const at::Device& device, uint64_t seed, std::string name);
  ~RandomStream();
  RandomStream(const RandomStream&) = delete;
  RandomStream& operator=(const RandomStream&) = delete;

  const std::string& name() const { return name_; }
  const at::Device& device() const { return device_; }
  /// The stream's generator (for graph registration).
  const at::Generator& generator() const { return generator_; }
  /// How far the stream has advanced: the Philox offset on CUDA; on the CPU the forks so far (each fork
  /// there draws from a generator seeded by the stream's seed and its number).
  uint64_t offset() const;
  /// Moves the stream to `offset`, keeping its seed: a resumed run continues where the saved one stopped
  /// (tensor ranks differ only in their seeds and advance alike).
  void set_offset(uint64_t offset);
  /// The generator's whole state, and its restoration (capture code must not shift the stream).
  at::Tensor state() const;
  void restore(const at::Tensor& state);

  /// While alive, the device's default generator draws from the stream. Forks do not nest.
  class Fork {
   public:
    explicit Fork(RandomStream& stream);
    ~Fork();
    Fork(const Fork&) = delete;
    Fork& operator=(const Fork&) = delete;

   private:
    RandomStream& stream_;
    at::Generator saved_;     ///< CUDA: the default generator's own state object
    at::Tensor saved_state_;  ///< CPU: a copy of the default generator's state
  };

 private:
  at::Device device_;
  std::string name_;
  uint64_t seed_ = 0;
  uint64_t forks_ = 0;  ///< CPU: forks so far
  at::Generator generator_;
};

/// Every random state that capture code puts back after its warm-ups and captures, so that they do not shift
/// training's random numbers: the default generators' (rng_states in capture/random_states.h) and every stream's.
class RandomStateSnapshot {
 public:
  explicit RandomStateSnapshot(const at::Device& device);
  void restore() const;

 private:
  at::Device device_;
  std::map<std::string, at::Tensor> defaults_;
  std::map<std::string, at::Tensor> streams_;
};

/// Every live stream on `device`, oldest first.
std::vector<RandomStream*> random_streams(const at::Device& device);
/// Their states by name, and their restoration (names not given are left alone).
std::vector<std::pair<std::string, at::Tensor>> random_stream_states(const at::Device& device);
void restore_random_stream_states(const at::Device& device, const std::map<std::string, at::Tensor>& states);

}  // namespace graphed::capture
