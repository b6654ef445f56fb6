// model/fused_path.h — the model's fused training path (model/kernel_path.h), turned on once by the trainer:
// norms, linears, RoPE, SwiGLU, the residual add and the output layer with its loss run through
// kernels/training_ops.h, reading working copies of the weights (bf16 on a GPU) that the optimizer refreshes
// at every step, instead of autocast casting every weight at every use. Its inference operations are the
// KernelPath defaults over these (serving loads a model of its own, with the decode kernels).
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/model/kernel_path.h"

namespace graphed::model {

/// Whether the fused path reads the GptModel parameter named `name` only through its working copy, never its own
/// (fp32) values: the weights of the linears, of the untied output layer and of the router. Such a parameter's
/// values may live elsewhere (the distributed optimizer keeps only its shard of them); the others (norms, biases,
/// embeddings, Mamba's per-channel parameters, experts and the shared-expert gate) are read as they are.
bool reads_only_working_copy(const std::string& name);

class FusedPath final : public KernelPath {
 public:
  /// copies: (master parameter, its working copy of the same shape) pairs; activation_type: what the
  /// fused norms hand to the linears (bf16 on a GPU); accumulate_in_place: the norms and the linears add
  /// their weights' gradients straight into .grad, the linears inside the gradient GEMM (a watcher of
  /// gradients hears of each through kernels/accumulation_listeners.h).
  FusedPath(const std::vector<std::pair<at::Tensor, at::Tensor>>& copies, at::ScalarType activation_type,
            bool accumulate_in_place = false);

  /// The working copy of `master`, or an undefined tensor when it has none (or is undefined). Calls the waiter first.
  at::Tensor copy_of(const at::Tensor& master) const;
  /// Called with every master before its copy is read: the distributed optimizer's overlapped gather waits there
  /// for the copy's bucket (--overlap-param-gather). Empty = none.
  void wait_for_copies_with(std::function<void(const at::Tensor& master)> waiter) { waiter_ = std::move(waiter); }

  at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const override;
  at::Tensor inference_linear(const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& bias) const override {
    return linear(input, weight, bias);
  }
  at::Tensor norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                  double epsilon) const override;
  kernels::NormedStream residual_norm(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                                      double epsilon) const override;
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const override;
  at::Tensor swiglu(const at::Tensor& x) const override;
  at::Tensor residual_add(const at::Tensor& hidden, const at::Tensor& update) const override;
  /// The working copy where it is of `type` (its gradient added into the master's .grad in place), else a cast.
  at::Tensor working_weight(const at::Tensor& master, at::ScalarType type) const override;
  at::Tensor logits(const at::Tensor& normed, const at::Tensor& weight) const override;
  bool fuses_output_loss() const override { return true; }
  at::Tensor linear_cross_entropy(const at::Tensor& normed, const at::Tensor& weight,
                                  const at::Tensor& labels) const override;

  /// Whether the norms and linears add their weights' gradients into .grad now (never while a warmup only
  /// probes the gradients).
  bool accumulates_in_place() const;

 private:
  std::function<void(const at::Tensor&)> waiter_;
  std::unordered_map<const void*, at::Tensor> copies_;  ///< by the master's TensorImpl
  at::ScalarType activation_type_;
  bool accumulate_in_place_;
};

}  // namespace graphed::model
