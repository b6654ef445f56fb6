// train/adamw.h — AdamW whose whole state lives on the device: moments, per-parameter step counts
// and the learning rate are tensors, so step() launches work without reading anything from the host
// (capturable in a CUDA graph). Gradients are allocated at construction and zeroed in place, so
// their addresses never change; when every parameter has one dtype and device they are views of one
// flat buffer (as Megatron's grad buffer), so zeroing and the global norm are one kernel each instead
// of one per parameter. Fused kernel on CUDA LibTorch 2.x (util/compat.h). With working copies (the
// model's fused path) the parameters and moments are flat buffers too, stepped by one kernel that also
// writes the copies (kernels::adamw_step). With a FlatLayout (the distributed optimizer) the flat buffers
// follow that layout and the moments cover only the ranges this rank steps: its shards (train/gradient_shards.h).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::train {

/// Elements [begin, begin + length) of the flat buffers.
struct FlatRange {
  int64_t begin = 0;
  int64_t length = 0;
};

/// Where each parameter sits in the flat buffers (padding between them stays zero) and the ranges this optimizer
/// steps; the moments hold those ranges only, one after another.
struct FlatLayout {
  std::vector<int64_t> offsets;  ///< by parameter, in the optimizer's order
  int64_t elements = 0;
  std::vector<FlatRange> stepped;
  /// Elements [0, sharded_masters) keep their fp32 values only in the stepped ranges there (each wholly inside or
  /// outside), compact as the moments are; the parameters there are released: they keep their shapes but no
  /// storage, and are read only through their working copies (which need working copies).
  int64_t sharded_masters = 0;
};

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  /// Working copies of the parameters in this type (bf16 for the model's fused path), refreshed by every
  /// step; needs parameters of one dtype and device (else there are none).
  std::optional<at::ScalarType> working_copies;
  /// The flat buffers' layout and the stepped ranges; unset = the parameters one after another, all stepped.
  /// Needs parameters of one dtype and device.
  std::optional<FlatLayout> flat_layout;
};

class AdamW {
 public:
  /// named_parameters: (name, parameter) pairs; names key the checkpoint state.
  AdamW(std::vector<std::pair<std::string, at::Tensor>> named_parameters, const AdamWOptions& options);

  /// Writes the learning rate into the device tensor (an eager fill, outside any graph).
  void set_learning_rate(double lr);
  /// One update. grad_scale (device scalar) divides every gradient first: sync-free clipping.
  void step(const std::optional<at::Tensor>& grad_scale);
  /// Zeroes every gradient in place.
  void zero_grad();
  /// The global L2 norm of all gradients (a float32 device scalar; no host sync).
  at::Tensor gradient_norm() const;

  const std::vector<at::Tensor>& parameters() const { return parameters_; }
  const std::vector<at::Tensor>& gradients() const { return gradients_; }
  /// The one buffer every gradient is a view of (undefined when they differ in dtype or device).
  const at::Tensor& flat_gradients() const { return flat_gradients_; }
  /// (parameter, working copy) pairs; empty without working copies.
  std::vector<std::pair<at::Tensor, at::Tensor>> working_copies() const;
  /// Writes the parameters into their working copies: call after the parameters change outside step()
  /// (a checkpoint load).
  void refresh_working_copies();

  /// Every state tensor by name ("<param>.exp_avg", "<param>.exp_avg_sq", "<param>.step", "lr"),
  /// for checkpoints. The tensors are the live state: copying into them restores it. Not when the moments
  /// cover only some ranges (sharded(): gradient_shards.h gathers and scatters them).
  std::vector<std::pair<std::string, at::Tensor>> state();

  /// Whether the moments cover only the stepped ranges of a FlatLayout (some elements are not this rank's).
  bool sharded() const { return sharded_; }
  const std::vector<std::string>& names() const { return names_; }
  /// The flat buffers (with working copies or a FlatLayout): the parameters' fp32 values from sharded_masters() on,
  /// the copies (may be undefined, else every element), the two moments over the stepped ranges, one after another,
  /// and the released parameters' fp32 values over their stepped ranges (their first ones), one after another.
  const at::Tensor& flat_parameters() const { return flat_parameters_; }
  const at::Tensor& master_shards() const { return master_shards_; }
  int64_t sharded_masters() const { return sharded_masters_; }
  /// Whether parameter `index` is released (its fp32 values only in master_shards(), for the stepped ranges).
  bool released(std::size_t index) const { return index < released_.size() && released_[index]; }
  /// Writes whole `values` of released parameter `index` (its shape, fp32) into its copy and its master shards (a
  /// checkpoint just read).
  void write_released(std::size_t index, const at::Tensor& values);
  const at::Tensor& flat_copies() const { return flat_copies_; }
  const at::Tensor& flat_exp_avg() const { return flat_exp_avg_; }
  const at::Tensor& flat_exp_avg_sq() const { return flat_exp_avg_sq_; }
  const std::vector<FlatRange>& stepped() const { return stepped_; }
  /// The bytes of both moments this optimizer keeps (with a sharded layout, of its ranges only).
  int64_t moment_bytes() const;
  /// The bytes of the parameters' own values it keeps (the released parameters' shards only).
  int64_t master_bytes() const;
  /// The one step count (flat state) and the learning rate.
  const at::Tensor& step_count() const { return step_; }
  const at::Tensor& learning_rate() const { return lr_; }

 private:
  AdamWOptions options_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> parameters_, gradients_, exp_avgs_, exp_avg_sqs_, steps_;
  at::Tensor lr_;
  at::Tensor flat_gradients_;  ///< every gradient's storage, when they share a dtype and device
  // With working copies: the parameters, moments and copies as flat buffers, and one step count.
  at::Tensor flat_parameters_, flat_exp_avg_, flat_exp_avg_sq_, flat_copies_, step_;
  std::vector<at::Tensor> copies_;
  std::vector<FlatRange> stepped_;  ///< the ranges step() updates (flat state)
  bool sharded_ = false;
  int64_t sharded_masters_ = 0;
  at::Tensor master_shards_;
  std::vector<bool> released_;
  std::vector<int64_t> offsets_;

  /// The fp32 values of stepped range `range` (whose moments start at `moment`).
  at::Tensor masters_of(const FlatRange& range, int64_t moment) const;
  /// Parameter i into the flat buffers: its fp32 view there, or (released) its copy and master shards, its own
  /// storage then let go.
  void place_parameter(std::size_t i, const FlatLayout& layout);

  void make_flat_state(const FlatLayout& layout);
};

}  // namespace graphed::train
