// model/layer_part.h — what a transformer layer (model/transformer_layer.h) is made of: which parts it holds
// (LayerParts: a mixer, then a feed-forward part), the graphable units they offer (LayerUnit) and what every
// part provides (LayerPart: its units, kernel path and tensor-parallel split). The two kinds of part are
// model/mixer_part.h and model/feed_forward_part.h; each is chosen once, when the layer is built.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "graphed/capture/unit_runner.h"
#include "graphed/model/kernel_path.h"
#include "graphed/model/tensor_parallel.h"

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

/// A layer's runners, one per unit (TransformerLayerImpl::set_runner); null for a unit the layer lacks, and for
/// kWholeLayer and kMoe while they compose the smaller units.
class UnitRunners {
 public:
  std::shared_ptr<capture::UnitRunner>& operator[](LayerUnit unit) { return runners_[static_cast<std::size_t>(unit)]; }
  const std::shared_ptr<capture::UnitRunner>& operator[](LayerUnit unit) const {
    return runners_[static_cast<std::size_t>(unit)];
  }

 private:
  std::array<std::shared_ptr<capture::UnitRunner>, kLayerUnitCount> runners_;
};

/// Parameters by their names in the layer ("attention.qkv_weight").
using NamedParameters = std::vector<std::pair<std::string, at::Tensor>>;
/// Appends every parameter of `module` (its children's too) to `parameters`, named `prefix` + its name there.
void append_parameters(NamedParameters& parameters, const std::string& prefix, const torch::nn::Module& module);

/// One part of a layer. It registers its modules on the layer under the layer's own names ("input_norm",
/// "attention", "mlp_norm", "moe", ...), so checkpoints and Hugging Face names see no part; a part that the
/// layer lacks offers no unit and does nothing.
class LayerPart {
 public:
  virtual ~LayerPart() = default;
  /// The units this part offers, never kWholeLayer.
  virtual std::vector<LayerUnit> units() const = 0;
  /// The parameters one of its units reads, by their names in the layer.
  virtual NamedParameters unit_parameters(LayerUnit unit) const = 0;
  /// The function of one of its units (inputs and outputs as model/transformer_layer.h lists them).
  virtual capture::GraphableUnit::Function unit_forward(LayerUnit unit) = 0;
  /// The kernels its modules run (model/kernel_path.h).
  virtual void use_kernel_path(const std::shared_ptr<const KernelPath>& path) = 0;
  /// Keeps this rank's part of its modules (model/tensor_parallel.h); the norms stay whole. Once.
  virtual void split_for_tensor_parallel(const TensorParallel& tensor) = 0;
  /// The split of each of its parameters that is not whole on every rank, by its name in the layer.
  virtual std::vector<std::pair<std::string, ParameterSplit>> tensor_splits() const = 0;
};

/// `module`'s tensor splits, each named `prefix` + its name there ("attention." + "qkv_weight").
std::vector<std::pair<std::string, ParameterSplit>> prefixed(
    const std::string& prefix, const std::vector<std::pair<std::string, ParameterSplit>>& splits);

}  // namespace graphed::model
