// model/transformer_layer.h — one pre-norm decoder layer and its graphable units: norm -> mixer -> norm ->
// feed-forward, each part closed by a residual add. A layer has two parts (LayerParts, model/layer_part.h),
// chosen once when it is built: a mixer (attention, Mamba or none: model/mixer_part.h) and a feed-forward part
// (MLP, MoE or none: model/feed_forward_part.h). A GPT layer has attention and an MLP or MoE; a hybrid model's
// layer has one real part (Megatron's M * - E). Each unit is a capture::GraphableUnit called through a
// capture::UnitRunner (eager by default); the capture issues swap runners without the layer knowing how they
// run. Units (Megatron's --cuda-graph-modules):
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
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "graphed/capture/unit_runner.h"
#include "graphed/config/model_config.h"
#include "graphed/model/feed_forward_part.h"
#include "graphed/model/layer_part.h"
#include "graphed/model/layer_shapes.h"  // the modules' shapes from the config (the trainer reads mamba_shape)
#include "graphed/model/mixer_part.h"
#include "graphed/model/residual.h"

namespace graphed::model {

class TransformerLayerImpl : public torch::nn::Module {
 public:
  /// layer_number counts from 1 (Megatron). The parts register their modules on the layer, in this order:
  /// input_norm, attention or mamba (the mixer's), mlp_norm, mlp or moe (the feed-forward part's).
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

  const LayerParts& parts() const { return parts_; }
  bool is_moe() const { return parts_.feed_forward == FeedForward::kMoe; }
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
  /// The part that offers `unit` (never kWholeLayer).
  LayerPart& part_of(LayerUnit unit) const;
  std::vector<at::Tensor> whole_layer_unit(const at::Tensor& hidden);
  /// The parts through their units' runners.
  std::pair<at::Tensor, at::Tensor> compose(const at::Tensor& hidden, int64_t microbatch);
  NamedParameters unit_parameters(LayerUnit unit) const;

  int64_t layer_number_;
  LayerParts parts_;
  Residual residual_;  ///< closes both parts; declared before them, which hold it
  std::unique_ptr<MixerPart> mixer_;
  std::unique_ptr<FeedForwardPart> feed_forward_;
  std::array<LayerPart*, kLayerUnitCount> owners_{};  ///< the part offering each unit (into mixer_, feed_forward_)
  UnitRunners runners_;
};
TORCH_MODULE(TransformerLayer);

}  // namespace graphed::model
