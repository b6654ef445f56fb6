// model/residual.h — the residual add that closes each part of a transformer layer: hidden + update, with the
// layer's hidden dropout on the update while the layer trains (Megatron's bias-dropout-add without a bias). With
// sequence parallelism the update is this rank's part of the sequence and takes its own mask. The layer owns
// one and hands it to its parts (model/mixer_part.h, model/feed_forward_part.h).
#pragma once

#include <memory>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "graphed/model/kernel_path.h"
#include "graphed/model/tensor_parallel.h"

namespace graphed::model {

class Residual {
 public:
  /// layer: whose training flag turns the dropout on (not owned; the layer owns this residual). dropout: the
  /// probability (--hidden-dropout), 0 for none.
  Residual(const torch::nn::Module& layer, double dropout) : layer_(layer), dropout_(dropout) {}

  /// hidden + dropout(update); the path's residual add when no dropout runs.
  at::Tensor add(const at::Tensor& hidden, const at::Tensor& update) const;
  /// The kernels of the add (model/kernel_path.h).
  void use_kernel_path(std::shared_ptr<const KernelPath> path) { path_ = std::move(path); }
  /// Keeps `tensor`'s group when it is sequence-parallel: the dropout's masks then differ by rank.
  void split_for_tensor_parallel(const TensorParallel& tensor) {
    if (tensor.sequence_parallel()) tensor_ = tensor;
  }

 private:
  const torch::nn::Module& layer_;  // not owned; the layer owns this residual
  double dropout_;
  TensorParallel tensor_;  ///< one rank, or with sequence parallelism the group
  std::shared_ptr<const KernelPath> path_ = aten_path();
};

}  // namespace graphed::model
