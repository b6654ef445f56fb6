// capture/static_batch_buffer.h — every microbatch's inputs at fixed device addresses, for graphs
// that read them (Megatron's StaticBufferLoader). Filling copies new values into the same tensors;
// the data loader never hands a graph a new tensor. Model-agnostic: a microbatch is a list of tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::capture {

class StaticBatchBuffer {
 public:
  /// name appears in errors ("training batches").
  explicit StaticBatchBuffer(std::string name) : name_(std::move(name)) {}

  /// Copies the inputs of microbatch `microbatch` into its static tensors on `device` (allocated on the
  /// first fill; copies from pinned host memory do not block the host). Microbatches are filled in
  /// order the first time. Throws graphed::Error when a shape or dtype differs from the first fill.
  void fill_microbatch(int64_t microbatch, const std::vector<at::Tensor>& inputs, const at::Device& device);
  /// The static tensors of a microbatch.
  const std::vector<at::Tensor>& microbatch(int64_t microbatch) const;
  int64_t microbatches() const { return static_cast<int64_t>(slots_.size()); }
  /// The data pointer of every static tensor, in order (tests check they never change).
  std::vector<const void*> addresses() const;
  /// Bytes held by the static tensors.
  int64_t bytes() const;

 private:
  std::string name_;
  std::vector<std::vector<at::Tensor>> slots_;
};

}  // namespace graphed::capture
