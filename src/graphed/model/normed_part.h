// model/normed_part.h — what the parts of a layer share (model/mixer_part.cpp, model/feed_forward_part.cpp):
// NormedPart, a norm and a module registered on the layer under the layer's own names ("input_norm" and
// "attention", "mlp_norm" and "moe", ...), with the layer's residual and what follows from them alone (a unit's
// parameters, the kernel path, the tensor-parallel split and its listing); and AbsentPart, the null object of a
// part the layer lacks.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "graphed/model/layer_part.h"
#include "graphed/model/norm.h"
#include "graphed/model/residual.h"
#include "graphed/util/error.h"

namespace graphed::model {

/// A part (Part: MixerPart or FeedForwardPart) of a norm and a module (Holder: Attention, MambaMixer, Mlp, Moe).
template <typename Part, typename Holder>
class NormedPart : public Part {
 public:
  NormedPart(torch::nn::Module& layer, const Residual& residual, const std::string& norm_name, Norm norm,
             const std::string& module_name, Holder module)
      : residual_(residual), norm_name_(norm_name), module_name_(module_name) {
    norm_ = layer.register_module(norm_name, std::move(norm));  // in this order: the layer's parameter order
    module_ = layer.register_module(module_name, std::move(module));
  }

  NamedParameters unit_parameters(LayerUnit /*unit*/) const override {
    NamedParameters parameters;
    append_parameters(parameters, norm_name_ + ".", *norm_);
    append_parameters(parameters, module_name_ + ".", *module_);
    return parameters;
  }
  void use_kernel_path(const std::shared_ptr<const KernelPath>& path) override {
    norm_->use_kernel_path(path);
    module_->use_kernel_path(path);
  }
  void split_for_tensor_parallel(const TensorParallel& tensor) override { module_->split_for_tensor_parallel(tensor); }
  std::vector<std::pair<std::string, ParameterSplit>> tensor_splits() const override {
    return prefixed(module_name_ + ".", module_->tensor_splits());
  }

 protected:
  const Residual& residual_;  // not owned; the layer's
  std::string norm_name_, module_name_;
  Norm norm_{nullptr};
  Holder module_{nullptr};
};

/// A part the layer lacks (hybrid layers: 'M' and '*' have no feed-forward part, '-' and 'E' no mixer): no
/// units, no modules, nothing to split. `what` names it in the assertions ("a mixer").
template <typename Part>
class AbsentPart : public Part {
 public:
  explicit AbsentPart(const char* what) : what_(what) {}

  std::vector<LayerUnit> units() const override { return {}; }
  NamedParameters unit_parameters(LayerUnit unit) const override {
    GRAPHED_INTERNAL_ASSERT(false, "a layer without ", what_, " has no ", to_string(unit), " unit");
    return {};
  }
  capture::GraphableUnit::Function unit_forward(LayerUnit unit) override {
    GRAPHED_INTERNAL_ASSERT(false, "a layer without ", what_, " has no ", to_string(unit), " unit");
    return {};
  }
  void use_kernel_path(const std::shared_ptr<const KernelPath>& /*path*/) override {}
  void split_for_tensor_parallel(const TensorParallel& /*tensor*/) override {}
  std::vector<std::pair<std::string, ParameterSplit>> tensor_splits() const override { return {}; }

 private:
  const char* what_;
};

}  // namespace graphed::model
