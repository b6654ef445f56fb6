// model/transformer_layer.h — one pre-norm decoder layer and its graphable units. A layer has up to two
// parts (LayerParts): a mixer (attention or Mamba) and a feed-forward part (MLP or MoE). A GPT layer has
// attention and one feed-forward part; a hybrid model's layer has one part (Megatron's M * - E). Each
// unit is a capture::GraphableUnit called through a capture::UnitRunner (eager by default); the capture
// issues swap runners without the layer knowing how they run. Units (Megatron's --cuda-graph-modules):
//   kWholeLayer     {hidden} -> {hidden[, aux_loss]}         (empty module list; aux only on MoE layers)
//   kAttention      {hidden} -> {hidden}                      attn: norm, attention, dropout, residual
//   kMamba          {hidden} -> {hidden}                      mamba: norm, Mamba mixer, dropout, residual
//   kMlp            {hidden} -> {hidden}                      mlp: norm, MLP, dropout, residual (dense)
//   kMoe            {hidden} -> {hidden, aux_loss}            moe: norm, the whole MoE MLP, residual
//   kMoeRouter      {hidden} -> {tokens, weights, indices, aux_loss[, shared]}   moe_router
//   kMoePreprocess  {weights, indices} -> plan tensors        moe_preprocess
// Hidden states are [batch, seq, hidden]; aux_loss is a float32 scalar.
#pragma once

#include <array>
#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "graphed/capture/unit_runner.h"
#include "graphed/config/model_config.h"
#include "graphed/model/attention.h"
#include "graphed/model/mamba_mixer.h"
#include "graphed/model/mlp.h"
#include "graphed/model/moe.h"
#include "graphed/model/norm.h"

namespace graphed::model {

enum class LayerUnit { kWholeLayer, kAttention, kMlp, kMoe, kMoeRouter, kMoePreprocess, kMamba };
inline constexpr std::size_t kLayerUnitCount = 7;
/// "layer", "attention", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"
const char* to_string(LayerUnit unit);

/// What a layer holds. Each part is a norm, the part itself and a residual add.
enum class Mixer { kNone, kAttention, kMamba };
enum class FeedForward { kNone, kDense, kMoe };
struct LayerParts {
  Mixer mixer = Mixer::kAttention;
  FeedForward feed_forward = FeedForward::kDense;
};
/// A GPT layer: attention, then an MLP or MoE.
LayerParts transformer_parts(bool is_moe);
/// A hybrid layer by Megatron's symbol: M Mamba, * attention, - MLP, E MoE.
LayerParts hybrid_parts(char symbol);
/// The Mamba mixer's shape from the config (--mamba-* settings).
MambaShape mamba_shape(const config::ModelConfig& config);

class TransformerLayerImpl : public torch::nn::Module {
 public:
  /// layer_number counts from 1 (Megatron).
  TransformerLayerImpl(const config::ModelConfig& config, int64_t layer_number, LayerParts parts);
  /// A GPT layer; is_moe picks the MoE MLP.
  TransformerLayerImpl(const config::ModelConfig& config, int64_t layer_number, bool is_moe)
      : TransformerLayerImpl(config, layer_number, transformer_parts(is_moe)) {}

  /// hidden [b, s, h] -> (hidden [b, s, h], aux loss scalar; undefined for a dense layer run eagerly).
  /// microbatch: which microbatch of the iteration this is (the runners of graph slots pick by it).
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& hidden, int64_t microbatch);

  /// Inference in a serving engine: one step's flat batch hidden [1, tokens, h] over a paged cache
  /// (Attention::forward_paged). A Mamba layer runs its decode tokens as one batch over their state
  /// slots and each prefill run from its request's slot, continuing the state it left.
  at::Tensor forward_paged(const at::Tensor& hidden, const PagedBatch& batch, const LayerCache& cache);
  /// The paged cache of this layer: keys and values of `blocks` blocks of `block_size` positions for
  /// attention, `state_slots` Mamba state slots, nothing for MLP or MoE.
  LayerCache allocate_paged_cache(int64_t blocks, int64_t block_size, int64_t state_slots,
                                  const at::TensorOptions& options) const;

  /// The attention module (null on a layer without attention).
  Attention& attention() { return attention_; }
  const LayerParts& parts() const { return parts_; }
  bool is_moe() const { return static_cast<bool>(moe_); }
  /// Whether this layer has the unit (kAttention / kMamba with that mixer, kMlp with a dense MLP,
  /// kMoe* with an MoE MLP; kWholeLayer always).
  bool has_unit(LayerUnit unit) const;
  /// The unit as a graphable function over tensors, named "layers.<i>.<unit>".
  capture::GraphableUnit unit(LayerUnit unit);
  /// Routes a unit through a runner. For kWholeLayer and kMoe, a runner replaces the composition of
  /// the smaller units; nullptr restores it. The others always have a runner (eager by default).
  void set_runner(LayerUnit unit, std::shared_ptr<capture::UnitRunner> runner);
  /// Puts the unit's default back: for kWholeLayer and kMoe the composition of the smaller units,
  /// for the others an eager runner.
  void use_eager_runner(LayerUnit unit);
  /// The kernels every part of the layer runs (model/kernel_path.h).
  void use_kernel_path(const std::shared_ptr<const KernelPath>& path);
  /// Megatron's layer number, from 1 over the whole model.
  int64_t layer_number() const { return layer_number_; }
  /// Keeps this rank's part of the attention, the Mamba mixer, the dense MLP or the MoE
  /// (model/tensor_parallel.h); the norms stay whole. Once.
  void split_for_tensor_parallel(const TensorParallel& tensor);
  /// The split of each parameter that is not whole on every rank, by its name in this layer.
  std::vector<std::pair<std::string, ParameterSplit>> tensor_splits() const;

 private:
  std::vector<at::Tensor> attention_unit(const at::Tensor& hidden);
  std::vector<at::Tensor> mamba_unit(const at::Tensor& hidden);
  /// The mixer unit this layer has (kAttention or kMamba); kWholeLayer when it has none.
  LayerUnit mixer_unit() const;
  /// The feed-forward part after the mixer's output, through the runners ({hidden, aux loss}).
  std::pair<at::Tensor, at::Tensor> compose_feed_forward(const at::Tensor& hidden, int64_t microbatch);
  std::vector<at::Tensor> mlp_unit(const at::Tensor& hidden);
  /// The MoE's input from the norm's output: the tokens [b s, h], or this rank's part [b, s / T, h] with
  /// sequence parallelism.
  at::Tensor moe_tokens(const at::Tensor& normed) const;
  std::vector<at::Tensor> moe_unit(const at::Tensor& hidden);
  std::vector<at::Tensor> router_unit(const at::Tensor& hidden);
  std::vector<at::Tensor> preprocess_unit(const at::Tensor& weights, const at::Tensor& indices);
  std::vector<at::Tensor> whole_layer_unit(const at::Tensor& hidden);
  std::pair<at::Tensor, at::Tensor> compose(const at::Tensor& hidden, int64_t microbatch);
  at::Tensor residual(const at::Tensor& hidden, const at::Tensor& update);
  std::vector<std::pair<std::string, at::Tensor>> unit_parameters(LayerUnit unit);

  int64_t layer_number_;
  LayerParts parts_;
  double hidden_dropout_;
  TensorParallel tensor_;  ///< one rank, or with sequence parallelism the group (dropout, the MoE's input)
  std::shared_ptr<const KernelPath> path_ = aten_path();  ///< its residual add
  Norm input_norm_{nullptr};
  Attention attention_{nullptr};
  MambaMixer mamba_{nullptr};
  Norm mlp_norm_{nullptr};
  Mlp mlp_{nullptr};
  Moe moe_{nullptr};
  std::array<std::shared_ptr<capture::UnitRunner>, kLayerUnitCount> runners_;
};
TORCH_MODULE(TransformerLayer);

}  // namespace graphed::model
