// model/mamba_mixer.h — the Mamba-2 mixer: input projection into z, x, B, C and dt; a short causal
// depthwise convolution over x, B and C; the selective scan in its chunked form (model/ssd_scan.h) with
// the skip D; a norm gated by z (RMSNorm per group of channels, after the gate); the output projection.
// Input and output [batch, seq, hidden]; no norm before it or residual after it (the layer's mixer part,
// model/mixer_part.h, adds those). Initialised as Mamba-2: A_log = log(U[1, 16]), dt's bias the
// inverse softplus of a log-uniform step in [dt_min, dt_max], D = 1. Inference continues from a
// LayerCache's conv and SSM states: chunked over a prompt, one recurrence step per decode token.
// Tensor parallelism as Megatron's MambaMixer: heads and groups split over the ranks (each segment of the
// in projection and of the convolution's channels on its own), the gated norm stays local (it normalises
// within a group), the out projection is row-parallel.
#pragma once

#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "graphed/model/kernel_path.h"
#include "graphed/model/layer_cache.h"
#include "graphed/model/tensor_parallel.h"

namespace graphed::model {

/// Megatron's defaults (--mamba-state-dim 128, --mamba-head-dim 64, --mamba-num-groups 8, conv width 4,
/// expand 2, chunk 128).
struct MambaShape {
  int64_t hidden_size = 0;
  int64_t state_size = 128;
  int64_t head_dim = 64;
  int64_t num_groups = 8;
  int64_t conv_width = 4;
  int64_t expand = 2;
  int64_t chunk_size = 128;
  double norm_epsilon = 1e-5;
  double init_std = 0.02;         ///< the input projection
  double output_init_std = 0.02;  ///< the output projection
  double dt_min = 0.001, dt_max = 0.1, dt_floor = 1e-4;

  int64_t num_heads_override = 0;  ///< --mamba-num-heads; 0 = expand x hidden / head dim

  int64_t num_heads() const { return num_heads_override > 0 ? num_heads_override : expand * hidden_size / head_dim; }
  int64_t inner_size() const { return num_heads() * head_dim; }
  /// The channels the convolution mixes: x, B and C.
  int64_t conv_channels() const { return inner_size() + 2 * num_groups * state_size; }
  /// The in projection's outputs: z, the convolution's channels, and dt per head.
  int64_t in_projection_size() const { return inner_size() + conv_channels() + num_heads(); }
  /// Weights of the two projections (what a token multiplies; the rest of the mixer is small).
  int64_t projection_weights() const { return hidden_size * in_projection_size() + inner_size() * hidden_size; }
};

class MambaMixerImpl : public torch::nn::Module {
 public:
  /// Checks the shape (inner size a multiple of head_dim and of num_groups, heads a multiple of groups).
  explicit MambaMixerImpl(const MambaShape& shape);
  at::Tensor forward(const at::Tensor& input);  // [b, s, h] -> [b, s, h]

  /// Inference over `states`' conv_state and ssm_state, which it continues from and updates in place.
  /// valid undefined: one decode token per row ([b, 1, h]), one recurrence step. valid [b, s] bool
  /// (prefill): the positions holding prompt tokens, a prefix of each row; the rest leave the states
  /// alone (dt = 0, and the conv state keeps the last valid inputs).
  at::Tensor forward_with_states(const at::Tensor& input, const at::Tensor& valid, const LayerCache& states) const;
  /// Zero conv and SSM states for `slots` state slots, in the scan's precision: float32 for a float32, bf16 or
  /// fp16 model (model_options' dtype), float64 for a float64 one; on model_options' device.
  LayerCache allocate_states(int64_t slots, const at::TensorOptions& model_options) const;
  /// The kernels of the mixer's projections (model/kernel_path.h; the fused path: the bf16 working copies,
  /// fp32 weight gradients).
  void use_kernel_path(std::shared_ptr<const KernelPath> path) { path_ = std::move(path); }
  /// Keeps this rank's heads and groups of every parameter (tensor_splits) and makes shape() the rank's
  /// own: heads / size and groups / size (both must divide, config rule PL-7). Once, before the caches are
  /// allocated (they take the rank's sizes).
  void split_for_tensor_parallel(const TensorParallel& tensor);
  /// The split of each parameter over the tensor ranks, by its name, in the whole layer's sizes.
  std::vector<std::pair<std::string, ParameterSplit>> tensor_splits() const;
  /// The shape this rank computes with: the whole layer's, or its part of the heads and groups once split.
  const MambaShape& shape() const { return shape_; }

 private:
  /// What one pass computes before the gated norm and the output projection.
  struct Pass {
    at::Tensor output;       ///< [b, s, hidden]
    at::Tensor convolved;    ///< [b, width - 1 + s, conv channels]: the history, then the conv inputs
    at::Tensor final_state;  ///< [b, heads, head dim, state]
  };
  /// The mixer over `input` (the whole sequence, already in the tensor region) from a conv `history`
  /// [b, width - 1, channels] and an SSM `state` (zeros when undefined); dt is masked by `valid` when
  /// defined; `recurrent`: the sequential scan. The output is summed over the tensor ranks.
  Pass run(const at::Tensor& input, const at::Tensor& history, const at::Tensor& state, const at::Tensor& valid,
           bool recurrent) const;
  /// A projection without bias, through the path.
  at::Tensor project(const at::Tensor& input, const at::Tensor& weight) const;
  /// The causal depthwise convolution along s of `inputs` [b, width - 1 + s, channels] (the history
  /// first), over the windows of width positions: out_t = bias + sum_k weight_k inputs_{t+k}. Then SiLU.
  at::Tensor convolve(const at::Tensor& inputs) const;
  /// RMSNorm per group of channels of y * silu(z), times the norm's weight.
  at::Tensor gated_norm(const at::Tensor& y, const at::Tensor& z) const;

  MambaShape whole_shape_;  ///< as built: what the tensor splits and checkpoints are in
  MambaShape shape_;        ///< this rank's: heads and groups / tensor size once split
  TensorParallel tensor_;
  at::Tensor in_proj_weight_;       // [2 inner + 2 groups state + heads, hidden]
  at::Tensor conv_weight_;          // [conv channels, conv width]
  at::Tensor conv_bias_;            // [conv channels]
  at::Tensor dt_bias_, a_log_, d_;  // [heads]
  at::Tensor norm_weight_;          // [inner]
  at::Tensor out_proj_weight_;      // [hidden, inner]
  std::shared_ptr<const KernelPath> path_ = aten_path();
};
TORCH_MODULE(MambaMixer);

}  // namespace graphed::model
