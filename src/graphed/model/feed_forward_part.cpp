// model/feed_forward_part.cpp — see model/feed_forward_part.h: the dense MLP, the MoE and the absent part.
#include "graphed/model/feed_forward_part.h"

#include "graphed/model/layer_shapes.h"
#include "graphed/model/mlp.h"
#include "graphed/model/moe.h"
#include "graphed/model/normed_part.h"
#include "graphed/util/error.h"

namespace graphed::model {
namespace {

// Each part adds its update to the stream its norm hands back (Norm::forward_stream, or with the part's first
// linear Norm::stream_then_linear), so the fused path sums the stream's two gradients inside the norm's backward.

class DenseFeedForward final : public NormedPart<FeedForwardPart, Mlp> {
 public:
  DenseFeedForward(const config::ModelConfig& config, torch::nn::Module& layer, const Residual& residual)
      : NormedPart(layer, residual, "mlp_norm", layer_norm(config), "mlp", Mlp(mlp_shape(config))) {}

  std::vector<LayerUnit> units() const override { return {LayerUnit::kMlp}; }
  capture::GraphableUnit::Function unit_forward(LayerUnit /*unit*/) override {
    return [this](const std::vector<at::Tensor>& in) { return forward(in.at(0)); };
  }

  std::vector<at::Tensor> forward(const at::Tensor& hidden) override {
    const NormedLinear branch = module_->forward_from_stream(hidden, *norm_);
    return {residual_.add(branch.stream, branch.output)};  // no aux loss: one output
  }
  std::pair<at::Tensor, at::Tensor> run(const at::Tensor& hidden, int64_t microbatch,
                                        const UnitRunners& runners) override {
    return {runners[LayerUnit::kMlp]->run({hidden}, microbatch)[0], at::Tensor()};
  }
  at::Tensor forward_paged(const at::Tensor& hidden) override { return module_->forward_inference(hidden, *norm_); }
};

/// The MoE as one unit (kMoe) or as its router and dispatch preprocessing (kMoeRouter, kMoePreprocess), the
/// experts running between them eagerly: how a dropless MoE is graphed.
class MoeFeedForward final : public NormedPart<FeedForwardPart, Moe> {
 public:
  MoeFeedForward(const config::ModelConfig& config, torch::nn::Module& layer, const Residual& residual)
      : NormedPart(layer, residual, "mlp_norm", layer_norm(config), "moe", Moe(moe_shape(config))) {}

  std::vector<LayerUnit> units() const override {
    return {LayerUnit::kMoe, LayerUnit::kMoeRouter, LayerUnit::kMoePreprocess};
  }
  NamedParameters unit_parameters(LayerUnit unit) const override;
  capture::GraphableUnit::Function unit_forward(LayerUnit unit) override;

  std::vector<at::Tensor> forward(const at::Tensor& hidden) override {
    const kernels::NormedStream input = norm_->forward_stream(hidden);
    auto [output, aux_loss] = module_->forward(tokens(input.normed));
    return {residual_.add(input.stream, output.view(hidden.sizes())), aux_loss};
  }
  std::pair<at::Tensor, at::Tensor> run(const at::Tensor& hidden, int64_t microbatch,
                                        const UnitRunners& runners) override;
  at::Tensor forward_paged(const at::Tensor& hidden) override { return forward(hidden)[0]; }

  void split_for_tensor_parallel(const TensorParallel& tensor) override {
    sequence_parallel_ = tensor.sequence_parallel();
    NormedPart::split_for_tensor_parallel(tensor);
  }

 private:
  /// The MoE's input from the norm's output: the tokens [b s, h], or this rank's part [b, s / T, h] with
  /// sequence parallelism (the MoE gathers the ranks' parts along the sequence).
  at::Tensor tokens(const at::Tensor& normed) const {
    return sequence_parallel_ ? normed : normed.reshape({-1, normed.size(-1)});
  }
  /// kMoeRouter: hidden -> {tokens, weights, indices, aux_loss[, shared expert's output]}.
  std::vector<at::Tensor> route(const at::Tensor& hidden);
  /// kMoePreprocess: the router's weights and indices -> the dispatch plan's tensors.
  std::vector<at::Tensor> preprocess(const at::Tensor& weights, const at::Tensor& indices) {
    return module_->plan_tensors(module_->plan(indices, weights));
  }

  bool sequence_parallel_ = false;
};

NamedParameters MoeFeedForward::unit_parameters(LayerUnit unit) const {
  NamedParameters parameters;
  switch (unit) {
    case LayerUnit::kMoe:
      append_parameters(parameters, "mlp_norm.", *norm_);
      append_parameters(parameters, "moe.", *module_);
      break;
    case LayerUnit::kMoeRouter:
      append_parameters(parameters, "mlp_norm.", *norm_);
      for (const auto& item : module_->named_parameters(false)) {
        // The router's weight and the shared expert's gate; the experts' weights run outside this unit.
        if (item.key() == "router_weight" || item.key() == "shared_expert_gate") {
          parameters.emplace_back("moe." + item.key(), item.value());
        }
      }
      for (const auto& child : module_->named_children()) {
        append_parameters(parameters, "moe." + child.key() + ".", *child.value());  // shared expert
      }
      break;
    case LayerUnit::kMoePreprocess: break;
    default: GRAPHED_INTERNAL_ASSERT(false, "an MoE has no ", to_string(unit), " unit");
  }
  return parameters;
}

capture::GraphableUnit::Function MoeFeedForward::unit_forward(LayerUnit unit) {
  switch (unit) {
    case LayerUnit::kMoe: return [this](const std::vector<at::Tensor>& in) { return forward(in.at(0)); };
    case LayerUnit::kMoeRouter: return [this](const std::vector<at::Tensor>& in) { return route(in.at(0)); };
    case LayerUnit::kMoePreprocess:
      return [this](const std::vector<at::Tensor>& in) { return preprocess(in.at(0), in.at(1)); };
    default: GRAPHED_INTERNAL_ASSERT(false, "an MoE has no ", to_string(unit), " unit");
  }
  return {};
}

std::vector<at::Tensor> MoeFeedForward::route(const at::Tensor& hidden) {
  const at::Tensor routed_tokens = tokens(norm_->forward(hidden));
  const Routing routing = module_->route(routed_tokens);
  std::vector<at::Tensor> outputs{routed_tokens, routing.weights, routing.indices, routing.aux_loss};
  const at::Tensor shared = module_->shared_expert(routed_tokens);
  if (shared.defined()) outputs.push_back(shared.reshape({-1, hidden.size(-1)}));
  return outputs;
}

std::pair<at::Tensor, at::Tensor> MoeFeedForward::run(const at::Tensor& hidden, int64_t microbatch,
                                                      const UnitRunners& runners) {
  if (runners[LayerUnit::kMoe]) {  // the whole MoE graphed (drop-and-pad)
    const auto outputs = runners[LayerUnit::kMoe]->run({hidden}, microbatch);
    return {outputs[0], outputs[1]};
  }
  const auto routed = runners[LayerUnit::kMoeRouter]->run({hidden}, microbatch);
  const auto planned = runners[LayerUnit::kMoePreprocess]->run({routed[1], routed[2]}, microbatch);
  at::Tensor output = module_->run_experts(routed[0], routed[1], module_->plan_from_tensors(planned));
  if (routed.size() > 4) output = output + routed[4];  // the shared expert's
  return {residual_.add(hidden, output.view(hidden.sizes())), routed[3]};
}

/// A layer without a feed-forward part (hybrid 'M' and '*'): the hidden states pass on as they are.
class NoFeedForward final : public AbsentPart<FeedForwardPart> {
 public:
  NoFeedForward() : AbsentPart("a feed-forward part") {}

  std::vector<at::Tensor> forward(const at::Tensor& hidden) override { return {hidden}; }
  std::pair<at::Tensor, at::Tensor> run(const at::Tensor& hidden, int64_t /*microbatch*/,
                                        const UnitRunners& /*runners*/) override {
    return {hidden, at::Tensor()};
  }
  at::Tensor forward_paged(const at::Tensor& hidden) override { return hidden; }
};

}  // namespace

std::unique_ptr<FeedForwardPart> make_feed_forward_part(FeedForward kind, const config::ModelConfig& config,
                                                        torch::nn::Module& layer, const Residual& residual) {
  switch (kind) {
    case FeedForward::kDense: return std::make_unique<DenseFeedForward>(config, layer, residual);
    case FeedForward::kMoe: return std::make_unique<MoeFeedForward>(config, layer, residual);
    case FeedForward::kNone: return std::make_unique<NoFeedForward>();
  }
  GRAPHED_INTERNAL_ASSERT(false, "feed-forward kind ", static_cast<int>(kind));
  return nullptr;
}

}  // namespace graphed::model
