// model/moe.cpp — see model/moe.h.
#include "graphed/model/moe.h"

#include <cmath>

#include "graphed/kernels/grouped_gemm_ops.h"
#include "graphed/kernels/moe_routing_ops.h"
#include "graphed/model/moe_expert_dispatch.h"
#include "graphed/model/paged_experts.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"

namespace graphed::model {
namespace {

/// The dispatch mode, chosen once: by the shape, and whether the experts are shared out over several ranks.
std::unique_ptr<const MoeDispatch> dispatch_for(const MoeShape& shape, int64_t expert_ranks) {
  const bool drop_and_pad = shape.capacity_factor.has_value() && shape.pad_to_capacity;
  if (drop_and_pad && expert_ranks > 1) return std::make_unique<AllToAllDropAndPadDispatch>();
  if (drop_and_pad) return std::make_unique<DropAndPadDispatch>();
  if (expert_ranks > 1 && shape.grouped_gemm && shape.expert_rank_capacity_factor) {
    return std::make_unique<AllToAllStaticDispatch>(*shape.expert_rank_capacity_factor);
  }
  if (expert_ranks > 1) return std::make_unique<AllToAllDroplessDispatch>();
  if (shape.grouped_gemm) return std::make_unique<GroupedDispatch>();
  return std::make_unique<DroplessDispatch>();
}

/// What follows the experts' first and second products.
kernels::ExpertActivation expert_activation(const MoeShape& shape) {
  if (shape.swiglu) return kernels::ExpertActivation::kSwiglu;
  return shape.openai_gelu ? kernels::ExpertActivation::kGeluTanh : kernels::ExpertActivation::kGelu;
}

}  // namespace

at::ScalarType expert_product_type(const at::Tensor& input) {
  return input.is_cuda() && compat::cuda_autocast_enabled() ? at::kBFloat16 : input.scalar_type();
}

MoeImpl::MoeImpl(const MoeShape& shape) : shape_(shape), dispatch_(dispatch_for(shape, 1)), active_(dispatch_.get()) {
  const int64_t e = shape.num_experts;
  const int64_t h = shape.hidden_size;
  const int64_t f = shape.expert_ffn_hidden_size;
  const int64_t f1 = shape.swiglu ? 2 * f : f;
  router_weight_ = register_parameter("router_weight", at::randn({e, h}) * shape.init_std);
  w1_ = register_parameter("experts_w1", at::randn({e, h, f1}) * shape.init_std);
  w2_ = register_parameter("experts_w2", at::randn({e, f, h}) * shape.output_init_std);
  if (shape.bias) {
    b1_ = register_parameter("experts_b1", at::zeros({e, 1, f1}));
    b2_ = register_parameter("experts_b2", at::zeros({e, 1, h}));
  }
  if (shape.shared_expert_size) {
    MlpShape mlp{h,
                 *shape.shared_expert_size,
                 shape.swiglu,
                 shape.bias,
                 shape.init_std,
                 shape.output_init_std,
                 shape.openai_gelu};
    shared_ = register_module("shared_expert", Mlp(mlp));
    if (shape.shared_expert_gate)
      shared_gate_ = register_parameter("shared_expert_gate", at::randn({1, h}) * shape.init_std);
  }
}

int64_t MoeImpl::capacity(int64_t num_tokens) const {
  const int64_t assignments = num_tokens * shape_.top_k;
  const double even_share = static_cast<double>(assignments) / static_cast<double>(shape_.num_experts);
  const auto slots = static_cast<int64_t>(std::ceil(even_share * shape_.capacity_factor.value_or(1.0)));
  return std::max<int64_t>(1, std::min(slots, assignments));
}

Routing MoeImpl::route(const at::Tensor& tokens) {
  const at::Tensor flat = tokens.reshape({-1, tokens.size(-1)});
  const int64_t e = shape_.num_experts;
  const int64_t k = shape_.top_k;
  // The logits in float32 or wider; under CUDA autocast the linear runs in bf16 whatever its input's type (a cast
  // to fp32 first would be undone, exactly).
  const bool autocast = flat.is_cuda() && compat::cuda_autocast_enabled();
  const auto compute = at::promote_types(flat.scalar_type(), at::kFloat);
  const at::Tensor logits = autocast ? at::linear(flat, path_->working_weight(router_weight_, at::kBFloat16))
                                     : at::linear(flat.to(compute), router_weight_.to(compute));  // [T, E]
  // Pre-softmax: the k largest probabilities as they are. Otherwise the k largest logits, softmaxed among
  // themselves: the same experts, and weights equal to the k probabilities renormalised to sum to 1.
  const kernels::RouteDecision decision = kernels::moe_route(logits, k, shape_.pre_softmax);
  std::vector<int64_t> routed_shape = tokens.sizes().vec();  // [..., k]: the tokens' own layout
  routed_shape.back() = k;
  Routing routing;
  routing.weights = decision.weights.view(routed_shape);
  routing.indices = decision.indices.view(routed_shape);
  // Switch load balancing: E x coeff / (k T^2) x sum_e(probability mass_e x tokens_e), over every token: with
  // sequence parallelism each rank routes its part, and the masses and counts are summed over the ranks. Both in
  // float32 or wider whatever the logits' type (bf16 under autocast would round counts past 256).
  const at::Tensor mass = tensor_.sum_of_sequence_parts(decision.mass);
  const at::Tensor counts = tensor_.sum_of_sequence_parts(decision.counts);
  const int64_t t = flat.size(0) * (tensor_.sequence_parallel() ? tensor_.size() : 1);
  const double scale = static_cast<double>(e) * shape_.aux_loss_coeff / static_cast<double>(k * t * t);
  routing.aux_loss = kernels::switch_balance_loss(mass, counts, scale);
  return routing;
}

DispatchPlan MoeImpl::plan(const at::Tensor& routed_indices, const at::Tensor& routed_weights) const {
  // Every token's routing (gathered over the ranks' sequence parts with sequence parallelism), in one order.
  const int64_t k = shape_.top_k;
  const at::Tensor indices = expert_tensor_.all_of_sequence(routed_indices).reshape({-1, k});
  const at::Tensor weights = expert_tensor_.all_of_sequence(routed_weights.detach()).reshape({-1, k});
  return active_->plan(*this, indices, weights);
}

void MoeImpl::split_for_tensor_parallel(const TensorParallel& tensor) {
  GRAPHED_INTERNAL_ASSERT(tensor_.size() == 1 && expert_.size() == 1,
                          "an MoE split twice, or over tensor ranks after expert ranks");
  tensor_ = tensor;
  if (!experts_whole_) expert_tensor_ = tensor;
  keep_own_shards(*this, tensor_splits(), tensor.shard());
  if (shared_) shared_->split_for_tensor_parallel(tensor);
}

std::vector<std::pair<std::string, ParameterSplit>> MoeImpl::tensor_splits() const {
  // w1 [E, h, f1] and b1 [E, 1, f1] split their ffn (last) dimension, w2 [E, f, h] its dimension 1.
  ParameterSplit fc1{shape_.swiglu ? TensorSplit::kSwiglu : TensorSplit::kColumn};
  fc1.dim = 2;
  ParameterSplit fc2{TensorSplit::kColumn};
  fc2.dim = 1;
  std::vector<std::pair<std::string, ParameterSplit>> splits;
  if (!experts_whole_) {
    splits = {{"experts_w1", fc1}, {"experts_w2", fc2}};
    if (b1_.defined()) {
      splits.emplace_back("experts_b1", fc1);
      splits.emplace_back("experts_b2", ParameterSplit{TensorSplit::kFirstRank});
    }
  }
  if (shared_) {
    for (const auto& [name, split] : shared_->tensor_splits()) splits.emplace_back("shared_expert." + name, split);
  }
  return splits;
}

void MoeImpl::split_for_expert_parallel(const ExpertParallel& expert) {
  GRAPHED_INTERNAL_ASSERT(expert_.size() == 1, "an MoE split over expert ranks twice");
  GRAPHED_INTERNAL_ASSERT(shape_.num_experts % expert.size() == 0, shape_.num_experts, " experts over ", expert.size(),
                          " ranks (config rule PL-14)");
  expert_ = expert;
  keep_own_shards(*this, expert_splits(), {expert.size(), expert.rank()});
  dispatch_ = dispatch_for(shape_, expert.size());
  if (dynamic_cast<const AllToAllStaticDispatch*>(dispatch_.get()) != nullptr) {
    fallback_ = std::make_unique<AllToAllDroplessDispatch>();
  }
  active_ = dispatch_.get();
}

void MoeImpl::record_overflow(const at::Tensor& overflowed, const at::Tensor& rows_needed) {
  const at::Tensor both = at::stack({overflowed.to(at::kLong), rows_needed.to(at::kLong)});
  if (!overflow_.defined()) overflow_ = at::zeros({2}, both.options());
  overflow_.copy_(at::maximum(overflow_, both));
}

at::Tensor MoeImpl::take_overflow() {
  if (!overflow_.defined()) return at::Tensor();
  const at::Tensor taken = overflow_.clone();
  overflow_.zero_();
  return taken;
}

std::vector<std::pair<std::string, ParameterSplit>> MoeImpl::expert_splits() const {
  const ParameterSplit by_expert{TensorSplit::kColumn};  // dimension 0
  std::vector<std::pair<std::string, ParameterSplit>> splits = {{"experts_w1", by_expert}, {"experts_w2", by_expert}};
  if (b1_.defined()) {
    splits.emplace_back("experts_b1", by_expert);
    splits.emplace_back("experts_b2", by_expert);
  }
  return splits;
}

at::Tensor MoeImpl::expert_mlp(const at::Tensor& input, int64_t expert) {
  at::Tensor hidden = at::matmul(input, w1_[expert]);
  if (b1_.defined()) hidden = hidden + b1_[expert];
  hidden = at::matmul(mlp_activation(hidden, shape_.swiglu, shape_.openai_gelu), w2_[expert]);
  const at::Tensor bias = expert_tensor_.on_first_rank(b2_);  // row-parallel: added once, before the ranks' sum
  return bias.defined() ? hidden + bias[expert] : hidden;
}

at::Tensor MoeImpl::all_experts(const at::Tensor& input) {
  at::Tensor hidden = at::bmm(input, w1_);
  if (b1_.defined()) hidden = hidden + b1_;
  hidden = at::bmm(mlp_activation(hidden, shape_.swiglu, shape_.openai_gelu), w2_);
  const at::Tensor bias = expert_tensor_.on_first_rank(b2_);
  return bias.defined() ? hidden + bias : hidden;
}

GroupedMlpWeights MoeImpl::grouped_weights(at::ScalarType type) const {
  GroupedMlpWeights weights;
  weights.type = type;
  weights.fc1 = path_->working_weight(w1_, type);
  weights.fc2 = path_->working_weight(w2_, type);
  weights.activation = expert_activation(shape_);
  if (b1_.defined()) weights.fc1_bias = b1_.squeeze(1);
  const at::Tensor second_bias = expert_tensor_.on_first_rank(b2_);  // row-parallel: added once, before the sum
  if (second_bias.defined()) weights.fc2_bias = second_bias.squeeze(1);
  return weights;
}

at::Tensor MoeImpl::grouped_experts(const at::Tensor& sorted, const at::Tensor& offsets) {
  const auto type = expert_product_type(sorted);
  return grouped_mlp(sorted.to(type), grouped_weights(type), offsets).output;
}

at::Tensor MoeImpl::block_experts(const at::Tensor& rows, const at::Tensor& offsets, const at::Tensor& filled,
                                  int64_t balanced) {
  if (!stash_) return grouped_experts(rows, offsets);
  const auto type = expert_product_type(rows);
  return paged_grouped_mlp(rows.to(type).contiguous(), grouped_weights(type), offsets, filled, balanced, *stash_);
}

at::Tensor MoeImpl::run_experts(const at::Tensor& routed_tokens, const at::Tensor& routing_weights,
                                const DispatchPlan& plan) {
  // Under tensor parallelism (each expert split over the tensor ranks) each rank's experts give partial outputs: the
  // tokens' and routing weights' gradients from them are summed over the ranks (the router's own are the same on every
  // rank). With sequence parallelism entering gathers every rank's part of the sequence, and the gradients are
  // reduce-scattered back.
  const at::Tensor entered = expert_tensor_.enter(routed_tokens);
  const std::vector<int64_t> token_shape = entered.sizes().vec();
  const at::Tensor tokens = entered.reshape({-1, entered.size(-1)});
  const at::Tensor weights = expert_tensor_.enter(routing_weights).reshape({-1, shape_.top_k});
  const at::Tensor output = active_->run_experts(*this, tokens, weights, plan);  // [T, h]
  // Leaving sums the ranks' partial outputs (with sequence parallelism reduce-scatters them to each rank's part).
  return expert_tensor_.leave(output.view(token_shape)).reshape({-1, tokens.size(1)});
}

at::Tensor MoeImpl::shared_expert(const at::Tensor& tokens) {
  if (!shared_) return at::Tensor();
  const at::Tensor output = shared_->forward(tokens);
  if (!shared_gate_.defined()) return output;
  // One scalar per token, from the tokens this rank holds (its part of the sequence with sequence parallelism).
  return output * at::sigmoid(at::linear(tokens, shared_gate_)).to(output.scalar_type());
}

std::pair<at::Tensor, at::Tensor> MoeImpl::forward(const at::Tensor& tokens) {
  const Routing routing = route(tokens);
  at::Tensor output = run_experts(tokens, routing.weights, plan(routing.indices, routing.weights));
  const at::Tensor shared = shared_expert(tokens);
  if (shared.defined()) output = output + shared.reshape_as(output);
  return {output, routing.aux_loss};
}

}  // namespace graphed::model
