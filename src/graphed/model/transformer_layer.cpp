// model/transformer_layer.cpp — see model/transformer_layer.h.
#include "graphed/model/transformer_layer.h"

#include "graphed/util/error.h"

namespace graphed::model {

TransformerLayerImpl::TransformerLayerImpl(const config::ModelConfig& config, int64_t layer_number, LayerParts parts)
    : layer_number_(layer_number),
      parts_(parts),
      residual_(*this, config.hidden_dropout),
      // The mixer registers its modules first: the layer's parameters keep their order (and initial values).
      mixer_(make_mixer_part(parts.mixer, config, *this, residual_)),
      feed_forward_(make_feed_forward_part(parts.feed_forward, config, *this, residual_)) {
  for (LayerPart* part : {static_cast<LayerPart*>(mixer_.get()), static_cast<LayerPart*>(feed_forward_.get())}) {
    for (const LayerUnit unit : part->units()) {
      owners_[static_cast<std::size_t>(unit)] = part;
      use_eager_runner(unit);
    }
  }
}

bool TransformerLayerImpl::has_unit(LayerUnit unit) const {
  return unit == LayerUnit::kWholeLayer || owners_[static_cast<std::size_t>(unit)] != nullptr;
}

LayerPart& TransformerLayerImpl::part_of(LayerUnit unit) const {
  GRAPHED_INTERNAL_ASSERT(unit != LayerUnit::kWholeLayer && has_unit(unit), "layer ", layer_number_, " has no ",
                          to_string(unit), " part");
  return *owners_[static_cast<std::size_t>(unit)];
}

std::vector<at::Tensor> TransformerLayerImpl::whole_layer_unit(const at::Tensor& hidden) {
  return feed_forward_->forward(mixer_->forward(hidden));
}

std::pair<at::Tensor, at::Tensor> TransformerLayerImpl::compose(const at::Tensor& hidden, int64_t microbatch) {
  return feed_forward_->run(mixer_->run(hidden, microbatch, runners_), microbatch, runners_);
}

std::pair<at::Tensor, at::Tensor> TransformerLayerImpl::forward(const at::Tensor& hidden, int64_t microbatch) {
  if (runners_[LayerUnit::kWholeLayer]) {
    const auto outputs = runners_[LayerUnit::kWholeLayer]->run({hidden}, microbatch);
    return {outputs[0], outputs.size() > 1 ? outputs[1] : at::Tensor()};
  }
  return compose(hidden, microbatch);
}

at::Tensor TransformerLayerImpl::forward_paged(const at::Tensor& hidden, const PagedBatch& batch,
                                               const LayerCache& cache) {
  return feed_forward_->forward_paged(mixer_->forward_paged(hidden, batch, cache));
}

LayerCache TransformerLayerImpl::allocate_paged_cache(int64_t blocks, int64_t block_size, int64_t state_slots,
                                                      const at::TensorOptions& options) const {
  return mixer_->allocate_paged_cache(blocks, block_size, state_slots, options);
}

NamedParameters TransformerLayerImpl::unit_parameters(LayerUnit unit) const {
  if (unit != LayerUnit::kWholeLayer) return part_of(unit).unit_parameters(unit);
  NamedParameters parameters;
  append_parameters(parameters, "", *this);
  return parameters;
}

capture::GraphableUnit TransformerLayerImpl::unit(LayerUnit which) {
  GRAPHED_INTERNAL_ASSERT(has_unit(which), "layer ", layer_number_, " has no ", to_string(which), " unit");
  capture::GraphableUnit unit;
  const std::string layer = "layers." + std::to_string(layer_number_ - 1) + ".";
  unit.name = layer + to_string(which);
  for (auto& [name, parameter] : unit_parameters(which)) {
    unit.parameter_names.push_back(layer + name);
    unit.parameters.push_back(parameter);
  }
  unit.input_names = which == LayerUnit::kMoePreprocess ? std::vector<std::string>{"weights", "indices"}
                                                        : std::vector<std::string>{"hidden"};
  if (which == LayerUnit::kWholeLayer) {
    unit.forward = [this](const std::vector<at::Tensor>& in) { return whole_layer_unit(in.at(0)); };
  } else {
    unit.forward = part_of(which).unit_forward(which);
  }
  return unit;
}

void TransformerLayerImpl::set_runner(LayerUnit which, std::shared_ptr<capture::UnitRunner> runner) {
  GRAPHED_INTERNAL_ASSERT(has_unit(which), "layer ", layer_number_, " has no ", to_string(which), " unit");
  const bool optional = which == LayerUnit::kWholeLayer || which == LayerUnit::kMoe;
  GRAPHED_INTERNAL_ASSERT(runner || optional, "the ", to_string(which), " unit always needs a runner");
  runners_[which] = std::move(runner);
}

void TransformerLayerImpl::use_eager_runner(LayerUnit which) {
  const bool composed = which == LayerUnit::kWholeLayer || which == LayerUnit::kMoe;
  set_runner(which, composed ? nullptr : std::make_shared<capture::EagerUnitRunner>(unit(which)));
}

void TransformerLayerImpl::split_for_tensor_parallel(const TensorParallel& tensor) {
  residual_.split_for_tensor_parallel(tensor);  // the sequence part: the residual's dropout
  mixer_->split_for_tensor_parallel(tensor);
  feed_forward_->split_for_tensor_parallel(tensor);
}

std::vector<std::pair<std::string, ParameterSplit>> TransformerLayerImpl::tensor_splits() const {
  std::vector<std::pair<std::string, ParameterSplit>> splits = mixer_->tensor_splits();
  for (auto& split : feed_forward_->tensor_splits()) splits.push_back(std::move(split));
  return splits;
}

void TransformerLayerImpl::use_kernel_path(const std::shared_ptr<const KernelPath>& path) {
  residual_.use_kernel_path(path);
  mixer_->use_kernel_path(path);
  feed_forward_->use_kernel_path(path);
}

}  // namespace graphed::model
