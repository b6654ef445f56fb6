// kernels/peer_all_reduce_ops.h — the ATen face of kernels/peer_all_reduce.h: one rank's areas, the
// exchange of their handles (done by the caller's group, dist/peer_collectives.h), and the sum of a tensor.
// A CUDA build makes one for a CUDA device; elsewhere make_peer_all_reduce gives none and the caller keeps
// its library's all-reduce.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::kernels {

class PeerAllReduce {
 public:
  virtual ~PeerAllReduce() = default;
  /// This rank's area handle, for every peer.
  virtual std::vector<uint8_t> handle() const = 0;
  /// Maps every peer's area from handles[r] (in group order; this rank's own is skipped). Returns an empty
  /// string, or why a peer's area could not be mapped (no peer access between the GPUs).
  virtual std::string connect(const std::vector<std::vector<uint8_t>>& handles) = 0;
  /// Whether sum() takes `tensor`: CUDA, bf16 or fp32, a multiple of 16 bytes and at most the capacity. It
  /// looks at nothing but the shape and dtype, so every rank decides alike (sum() copies a strided or
  /// misaligned tensor first).
  virtual bool fits(const at::Tensor& tensor) const = 0;
  /// The sum over the ranks in rank order (the same bits on every rank), into a new tensor, on the current
  /// stream; capturable. Every rank calls it in the same order with the same shapes.
  virtual at::Tensor sum(const at::Tensor& tensor) = 0;
};

/// Whether this build has the kernel (a CUDA build).
bool peer_all_reduce_built();

/// For rank `rank` of `ranks` (2, 4 or 8) on `device`: areas taking tensors of up to `capacity_bytes`. Null on
/// a CPU build or device, or for another number of ranks. Throws DistributedError when the areas cannot be
/// allocated.
std::unique_ptr<PeerAllReduce> make_peer_all_reduce(int64_t rank, int64_t ranks, int64_t capacity_bytes,
                                                    const at::Device& device);

}  // namespace graphed::kernels
