// model/fused_path.h — the model's fused training path, turned on once by the trainer: norms, linears,
// RoPE, SwiGLU and the output layer with its loss run through kernels/training_ops.h, reading working
// copies of the weights (bf16 on a GPU) that the optimizer refreshes at every step, instead of autocast
// casting every weight at every use. Modules hold a shared pointer to it; without one they take the
// ATen path.
#pragma once

#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::model {

class FusedPath {
 public:
  /// copies: (master parameter, its working copy of the same shape) pairs; activation_type: what the
  /// fused norms hand to the linears (bf16 on a GPU); accumulate_in_place: the norms add their
  /// parameters' gradients straight into .grad (off where gradient hooks watch AccumulateGrad: the
  /// data-parallel overlap).
  FusedPath(const std::vector<std::pair<at::Tensor, at::Tensor>>& copies, at::ScalarType activation_type,
            bool accumulate_in_place = false);

  /// The working copy of `master`, or an undefined tensor when it has none (or is undefined).
  at::Tensor copy_of(const at::Tensor& master) const;
  at::ScalarType activation_type() const { return activation_type_; }
  bool accumulates_in_place() const { return accumulate_in_place_; }

 private:
  std::unordered_map<const void*, at::Tensor> copies_;  ///< by the master's TensorImpl
  at::ScalarType activation_type_;
  bool accumulate_in_place_;
};

}  // namespace graphed::model
