// model/transformer_layer.cpp — see model/transformer_layer.h.
#include "graphed/model/transformer_layer.h"

#include <algorithm>
#include <cmath>

#include "graphed/kernels/training_ops.h"
#include "graphed/util/error.h"

namespace graphed::model {
namespace {

std::size_t slot(LayerUnit unit) { return static_cast<std::size_t>(unit); }

/// The output projections' init std: Megatron's scaled init (std / sqrt(2 layers)).
double output_std(const config::ModelConfig& config) {
  return config.init_method_std / std::sqrt(2.0 * static_cast<double>(config.num_layers));
}

AttentionShape attention_shape(const config::ModelConfig& config) {
  AttentionShape attention;
  attention.hidden_size = config.hidden_size;
  attention.num_heads = config.num_attention_heads;
  attention.num_query_groups = config.num_query_groups.value_or(config.num_attention_heads);
  attention.head_dim = config.kv_channels.value_or(0);
  // Every position the model may see: the serving engine indexes the table by position, up to the model's
  // context (max_position_embeddings), which may exceed the training sequence.
  attention.max_sequence = std::max(config.seq_length, config.max_position_embeddings.value_or(config.seq_length));
  attention.rope = config.position_embedding_type == config::PositionEmbedding::kRope;
  attention.rotary_base = config.rotary_base;
  attention.rope_scaling = config.use_rope_scaling;
  attention.rope_scaling_options = {config.rope_scaling_factor, config.rope_scaling_low_freq_factor,
                                    config.rope_scaling_high_freq_factor,
                                    config.rope_scaling_original_max_position_embeddings};
  attention.bias = config.add_bias_linear;
  attention.qkv_bias = config.add_qkv_bias;
  attention.qk_norm = config.qk_layernorm;
  attention.rms_norm = config.normalization == config::Normalization::kRmsNorm;
  attention.norm_epsilon = config.norm_epsilon;
  attention.attention_dropout = config.attention_dropout;
  attention.init_std = config.init_method_std;
  attention.output_init_std = output_std(config);
  return attention;
}

MoeShape moe_shape(const config::ModelConfig& config) {
  MoeShape moe;
  moe.hidden_size = config.hidden_size;
  moe.num_experts = config.num_experts.value_or(2);
  moe.top_k = config.moe_router_topk;
  moe.expert_ffn_hidden_size =
      config.moe_ffn_hidden_size.value_or(config.ffn_hidden_size.value_or(4 * config.hidden_size));
  moe.shared_expert_size = config.moe_shared_expert_intermediate_size;
  moe.capacity_factor = config.moe_expert_capacity_factor;
  moe.pad_to_capacity = config.moe_pad_expert_input_to_capacity;
  moe.aux_loss_coeff = config.moe_aux_loss_coeff;
  moe.swiglu = config.swiglu;
  moe.openai_gelu = config.openai_gelu;
  moe.bias = config.add_bias_linear;
  moe.init_std = config.init_method_std;
  moe.output_init_std = output_std(config);
  return moe;
}

}  // namespace

const char* to_string(LayerUnit unit) {
  switch (unit) {
    case LayerUnit::kWholeLayer: return "layer";
    case LayerUnit::kAttention: return "attention";
    case LayerUnit::kMlp: return "mlp";
    case LayerUnit::kMoe: return "moe";
    case LayerUnit::kMoeRouter: return "moe_router";
    case LayerUnit::kMoePreprocess: return "moe_preprocess";
    case LayerUnit::kMamba: return "mamba";
  }
  return "unknown";
}

LayerParts transformer_parts(bool is_moe) {
  return {Mixer::kAttention, is_moe ? FeedForward::kMoe : FeedForward::kDense};
}

LayerParts hybrid_parts(char symbol) {
  switch (symbol) {
    case 'M': return {Mixer::kMamba, FeedForward::kNone};
    case '*': return {Mixer::kAttention, FeedForward::kNone};
    case '-': return {Mixer::kNone, FeedForward::kDense};
    case 'E': return {Mixer::kNone, FeedForward::kMoe};
  }
  GRAPHED_INTERNAL_ASSERT(false, "hybrid layer symbol '", std::string(1, symbol), "'");
  return {};
}

MambaShape mamba_shape(const config::ModelConfig& config) {
  MambaShape mamba;
  mamba.hidden_size = config.hidden_size;
  mamba.state_size = config.mamba_state_dim;
  mamba.head_dim = config.mamba_head_dim;
  mamba.num_groups = config.mamba_num_groups;
  mamba.num_heads_override = config.mamba_num_heads.value_or(0);
  mamba.conv_width = config.mamba_conv_width;
  mamba.chunk_size = config.mamba_chunk_size;
  mamba.norm_epsilon = config.norm_epsilon;
  mamba.init_std = config.init_method_std;
  mamba.output_init_std = output_std(config);
  return mamba;
}

TransformerLayerImpl::TransformerLayerImpl(const config::ModelConfig& config, int64_t layer_number, LayerParts parts)
    : layer_number_(layer_number), parts_(parts), hidden_dropout_(config.hidden_dropout) {
  const bool rms = config.normalization == config::Normalization::kRmsNorm;
  if (parts.mixer != Mixer::kNone) {
    input_norm_ = register_module("input_norm", Norm(config.hidden_size, rms, config.norm_epsilon));
  }
  if (parts.mixer == Mixer::kAttention) attention_ = register_module("attention", Attention(attention_shape(config)));
  if (parts.mixer == Mixer::kMamba) mamba_ = register_module("mamba", MambaMixer(mamba_shape(config)));
  if (parts.feed_forward != FeedForward::kNone) {
    mlp_norm_ = register_module("mlp_norm", Norm(config.hidden_size, rms, config.norm_epsilon));
  }
  if (parts.feed_forward == FeedForward::kMoe) moe_ = register_module("moe", Moe(moe_shape(config)));
  if (parts.feed_forward == FeedForward::kDense) {
    MlpShape mlp{config.hidden_size,     config.ffn_hidden_size.value_or(4 * config.hidden_size),
                 config.swiglu,          config.add_bias_linear,
                 config.init_method_std, output_std(config),
                 config.openai_gelu};
    mlp_ = register_module("mlp", Mlp(mlp));
  }
  for (const LayerUnit unit :
       {LayerUnit::kAttention, LayerUnit::kMamba, LayerUnit::kMlp, LayerUnit::kMoeRouter, LayerUnit::kMoePreprocess}) {
    if (has_unit(unit)) use_eager_runner(unit);
  }
}

bool TransformerLayerImpl::has_unit(LayerUnit unit) const {
  switch (unit) {
    case LayerUnit::kWholeLayer: return true;
    case LayerUnit::kAttention: return static_cast<bool>(attention_);
    case LayerUnit::kMamba: return static_cast<bool>(mamba_);
    case LayerUnit::kMlp: return static_cast<bool>(mlp_);
    case LayerUnit::kMoe:
    case LayerUnit::kMoeRouter:
    case LayerUnit::kMoePreprocess: return is_moe();
  }
  return false;
}

LayerUnit TransformerLayerImpl::mixer_unit() const {
  switch (parts_.mixer) {
    case Mixer::kAttention: return LayerUnit::kAttention;
    case Mixer::kMamba: return LayerUnit::kMamba;
    case Mixer::kNone: break;
  }
  return LayerUnit::kWholeLayer;
}

at::Tensor TransformerLayerImpl::residual(const at::Tensor& hidden, const at::Tensor& update) {
  if (hidden_dropout_ == 0.0 || !is_training()) {  // no dropout kernel at p = 0
    return path_->residual_add(hidden, update);
  }
  // With sequence parallelism `update` is this rank's part of the sequence: its own mask (Megatron's rule).
  return hidden + tensor_.with_rank_random([&] { return at::dropout(update, hidden_dropout_, /*train=*/true); });
}

// Each branch adds its update to the stream its norm hands back (Norm::forward_stream, or with the branch's
// first linear Norm::stream_then_linear), so the fused path sums the stream's two gradients inside the norm's
// backward.
std::vector<at::Tensor> TransformerLayerImpl::attention_unit(const at::Tensor& hidden) {
  const NormedLinear branch = attention_->forward_from_stream(hidden, *input_norm_);
  return {residual(branch.stream, branch.output)};
}

std::vector<at::Tensor> TransformerLayerImpl::mamba_unit(const at::Tensor& hidden) {
  const kernels::NormedStream input = input_norm_->forward_stream(hidden);
  return {residual(input.stream, mamba_->forward(input.normed))};
}

std::vector<at::Tensor> TransformerLayerImpl::mlp_unit(const at::Tensor& hidden) {
  const NormedLinear branch = mlp_->forward_from_stream(hidden, *mlp_norm_);
  return {residual(branch.stream, branch.output)};
}

at::Tensor TransformerLayerImpl::moe_tokens(const at::Tensor& normed) const {
  // With sequence parallelism the MoE gathers the ranks' parts along the sequence: it takes [b, s / T, h].
  return tensor_.sequence_parallel() ? normed : normed.reshape({-1, normed.size(-1)});
}

std::vector<at::Tensor> TransformerLayerImpl::moe_unit(const at::Tensor& hidden) {
  const kernels::NormedStream input = mlp_norm_->forward_stream(hidden);
  auto [output, aux_loss] = moe_->forward(moe_tokens(input.normed));
  return {residual(input.stream, output.view(hidden.sizes())), aux_loss};
}

std::vector<at::Tensor> TransformerLayerImpl::router_unit(const at::Tensor& hidden) {
  const at::Tensor tokens = moe_tokens(mlp_norm_->forward(hidden));
  const Routing routing = moe_->route(tokens);
  std::vector<at::Tensor> outputs{tokens, routing.weights, routing.indices, routing.aux_loss};
  const at::Tensor shared = moe_->shared_expert(tokens);
  if (shared.defined()) outputs.push_back(shared.reshape({-1, hidden.size(-1)}));
  return outputs;
}

std::vector<at::Tensor> TransformerLayerImpl::preprocess_unit(const at::Tensor& weights, const at::Tensor& indices) {
  return moe_->plan_tensors(moe_->plan(indices, weights));
}

std::pair<at::Tensor, at::Tensor> TransformerLayerImpl::compose_feed_forward(const at::Tensor& hidden,
                                                                             int64_t microbatch) {
  if (mlp_) return {runners_[slot(LayerUnit::kMlp)]->run({hidden}, microbatch)[0], at::Tensor()};  // no aux loss
  if (runners_[slot(LayerUnit::kMoe)]) {
    const auto outputs = runners_[slot(LayerUnit::kMoe)]->run({hidden}, microbatch);
    return {outputs[0], outputs[1]};
  }
  const auto routed = runners_[slot(LayerUnit::kMoeRouter)]->run({hidden}, microbatch);
  const auto planned = runners_[slot(LayerUnit::kMoePreprocess)]->run({routed[1], routed[2]}, microbatch);
  at::Tensor output = moe_->run_experts(routed[0], routed[1], moe_->plan_from_tensors(planned));
  if (routed.size() > 4) output = output + routed[4];
  return {residual(hidden, output.view(hidden.sizes())), routed[3]};
}

std::pair<at::Tensor, at::Tensor> TransformerLayerImpl::compose(const at::Tensor& hidden, int64_t microbatch) {
  const LayerUnit mixer = mixer_unit();
  const at::Tensor mixed =
      mixer == LayerUnit::kWholeLayer ? hidden : runners_[slot(mixer)]->run({hidden}, microbatch)[0];
  if (parts_.feed_forward == FeedForward::kNone) return {mixed, at::Tensor()};
  return compose_feed_forward(mixed, microbatch);
}

std::vector<at::Tensor> TransformerLayerImpl::whole_layer_unit(const at::Tensor& hidden) {
  at::Tensor mixed = hidden;
  if (attention_) mixed = attention_unit(hidden)[0];
  if (mamba_) mixed = mamba_unit(hidden)[0];
  if (mlp_) return mlp_unit(mixed);  // no aux loss: one output
  if (moe_) return moe_unit(mixed);
  return {mixed};
}

std::pair<at::Tensor, at::Tensor> TransformerLayerImpl::forward(const at::Tensor& hidden, int64_t microbatch) {
  if (runners_[slot(LayerUnit::kWholeLayer)]) {
    const auto outputs = runners_[slot(LayerUnit::kWholeLayer)]->run({hidden}, microbatch);
    return {outputs[0], outputs.size() > 1 ? outputs[1] : at::Tensor()};
  }
  return compose(hidden, microbatch);
}

namespace {

/// The Mamba mixer over a paged step: the decode tokens together over their requests' state slots,
/// then each prefill run over its request's slot (states gathered, advanced and written back).
at::Tensor mamba_paged(const MambaMixer& mamba, const at::Tensor& normed, const PagedBatch& batch,
                       const LayerCache& cache) {
  // A request's first tokens start from zero states (its slot may hold an earlier request's).
  const auto run_over = [&](const at::Tensor& input, const at::Tensor& slots, const at::Tensor& valid, bool start) {
    LayerCache states;
    states.conv_state = cache.conv_state.index_select(0, slots);
    states.ssm_state = cache.ssm_state.index_select(0, slots);
    if (start) states.reset_recurrent_state();
    const at::Tensor output = mamba->forward_with_states(input, valid, states);
    cache.conv_state.index_copy_(0, slots, states.conv_state);
    cache.ssm_state.index_copy_(0, slots, states.ssm_state);
    return output;
  };
  const int64_t decode = batch.decode_tokens;
  GRAPHED_INTERNAL_ASSERT(!batch.segments.empty() || decode == batch.token_count(),
                          "a Mamba layer in a step of only paged tokens must have only decode tokens");
  std::vector<at::Tensor> parts;
  if (decode > 0) {  // [decode, 1, h]: one recurrence step each
    const at::Tensor input = normed[0].narrow(0, 0, decode).unsqueeze(1);
    parts.push_back(run_over(input, batch.state_slots.narrow(0, 0, decode), at::Tensor(), false).view({1, decode, -1}));
  }
  for (const PrefillSegment& segment : batch.segments) {
    const at::Tensor input = normed.narrow(1, segment.first_token, segment.length);
    const at::Tensor valid = at::ones({1, segment.length}, batch.slots.options().dtype(at::kBool));
    parts.push_back(
        run_over(input, batch.state_slots.narrow(0, segment.request, 1), valid, segment.first_position == 0));
  }
  return parts.size() == 1 ? parts[0] : at::cat(parts, 1);
}

}  // namespace

at::Tensor TransformerLayerImpl::forward_paged(const at::Tensor& hidden, const PagedBatch& batch,
                                               const LayerCache& cache) {
  at::Tensor mixed = hidden;
  if (attention_) mixed = attention_->forward_paged(hidden, *input_norm_, batch, cache);
  if (mamba_) mixed = hidden + mamba_paged(mamba_, input_norm_->forward_inference(hidden), batch, cache);
  if (moe_) return moe_unit(mixed)[0];
  if (mlp_) return mlp_->forward_inference(mixed, *mlp_norm_);
  return mixed;
}

LayerCache TransformerLayerImpl::allocate_paged_cache(int64_t blocks, int64_t block_size, int64_t state_slots,
                                                      const at::TensorOptions& options) const {
  if (mamba_) return mamba_->allocate_states(state_slots, options);
  if (attention_) return attention_->allocate_paged_cache(blocks, block_size, options);
  return {};
}

std::vector<std::pair<std::string, at::Tensor>> TransformerLayerImpl::unit_parameters(LayerUnit unit) {
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  const std::string layer = "layers." + std::to_string(layer_number_ - 1) + ".";
  const auto append = [&](const std::string& prefix, torch::nn::Module& module) {
    for (const auto& item : module.named_parameters())
      parameters.emplace_back(layer + prefix + item.key(), item.value());
  };
  switch (unit) {
    case LayerUnit::kWholeLayer: append("", *this); break;
    case LayerUnit::kAttention:
      append("input_norm.", *input_norm_);
      append("attention.", *attention_);
      break;
    case LayerUnit::kMamba:
      append("input_norm.", *input_norm_);
      append("mamba.", *mamba_);
      break;
    case LayerUnit::kMlp:
      append("mlp_norm.", *mlp_norm_);
      append("mlp.", *mlp_);
      break;
    case LayerUnit::kMoe:
      append("mlp_norm.", *mlp_norm_);
      append("moe.", *moe_);
      break;
    case LayerUnit::kMoeRouter:
      append("mlp_norm.", *mlp_norm_);
      parameters.emplace_back(layer + "moe.router_weight", moe_->named_parameters(false)["router_weight"]);
      for (const auto& child : moe_->named_children())
        append("moe." + child.key() + ".", *child.value());  // shared expert
      break;
    case LayerUnit::kMoePreprocess: break;
  }
  return parameters;
}

capture::GraphableUnit TransformerLayerImpl::unit(LayerUnit which) {
  GRAPHED_INTERNAL_ASSERT(has_unit(which), "layer ", layer_number_, " has no ", to_string(which), " unit");
  capture::GraphableUnit unit;
  unit.name = "layers." + std::to_string(layer_number_ - 1) + "." + to_string(which);
  for (auto& [name, parameter] : unit_parameters(which)) {
    unit.parameter_names.push_back(name);
    unit.parameters.push_back(parameter);
  }
  unit.input_names = which == LayerUnit::kMoePreprocess ? std::vector<std::string>{"weights", "indices"}
                                                        : std::vector<std::string>{"hidden"};
  switch (which) {
    case LayerUnit::kWholeLayer:
      unit.forward = [this](const std::vector<at::Tensor>& in) { return whole_layer_unit(in.at(0)); };
      break;
    case LayerUnit::kAttention:
      unit.forward = [this](const std::vector<at::Tensor>& in) { return attention_unit(in.at(0)); };
      break;
    case LayerUnit::kMamba:
      unit.forward = [this](const std::vector<at::Tensor>& in) { return mamba_unit(in.at(0)); };
      break;
    case LayerUnit::kMlp:
      unit.forward = [this](const std::vector<at::Tensor>& in) { return mlp_unit(in.at(0)); };
      break;
    case LayerUnit::kMoe:
      unit.forward = [this](const std::vector<at::Tensor>& in) { return moe_unit(in.at(0)); };
      break;
    case LayerUnit::kMoeRouter:
      unit.forward = [this](const std::vector<at::Tensor>& in) { return router_unit(in.at(0)); };
      break;
    case LayerUnit::kMoePreprocess:
      unit.forward = [this](const std::vector<at::Tensor>& in) { return preprocess_unit(in.at(0), in.at(1)); };
      break;
  }
  return unit;
}

void TransformerLayerImpl::set_runner(LayerUnit which, std::shared_ptr<capture::UnitRunner> runner) {
  GRAPHED_INTERNAL_ASSERT(has_unit(which), "layer ", layer_number_, " has no ", to_string(which), " unit");
  const bool optional = which == LayerUnit::kWholeLayer || which == LayerUnit::kMoe;
  GRAPHED_INTERNAL_ASSERT(runner || optional, "the ", to_string(which), " unit always needs a runner");
  runners_[slot(which)] = std::move(runner);
}

void TransformerLayerImpl::split_for_tensor_parallel(const TensorParallel& tensor) {
  if (tensor.sequence_parallel()) tensor_ = tensor;  // the sequence part: the residual's dropout, the MoE's input
  if (attention_) attention_->split_for_tensor_parallel(tensor);
  if (mamba_) mamba_->split_for_tensor_parallel(tensor);
  if (mlp_) mlp_->split_for_tensor_parallel(tensor);
  if (moe_) moe_->split_for_tensor_parallel(tensor);
}

std::vector<std::pair<std::string, ParameterSplit>> TransformerLayerImpl::tensor_splits() const {
  std::vector<std::pair<std::string, ParameterSplit>> splits;
  if (attention_) {
    for (auto [name, split] : attention_->tensor_splits()) splits.emplace_back("attention." + name, split);
  }
  if (mamba_) {
    for (auto [name, split] : mamba_->tensor_splits()) splits.emplace_back("mamba." + name, split);
  }
  if (mlp_) {
    for (auto [name, split] : mlp_->tensor_splits()) splits.emplace_back("mlp." + name, split);
  }
  if (moe_) {
    for (auto [name, split] : moe_->tensor_splits()) splits.emplace_back("moe." + name, split);
  }
  return splits;
}

void TransformerLayerImpl::use_kernel_path(const std::shared_ptr<const KernelPath>& path) {
  path_ = path;
  if (input_norm_) input_norm_->use_kernel_path(path);
  if (attention_) attention_->use_kernel_path(path);
  if (mamba_) mamba_->use_kernel_path(path);
  if (mlp_norm_) mlp_norm_->use_kernel_path(path);
  if (mlp_) mlp_->use_kernel_path(path);
  if (moe_) moe_->use_kernel_path(path);
}

void TransformerLayerImpl::use_eager_runner(LayerUnit which) {
  const bool composed = which == LayerUnit::kWholeLayer || which == LayerUnit::kMoe;
  set_runner(which, composed ? nullptr : std::make_shared<capture::EagerUnitRunner>(unit(which)));
}

}  // namespace graphed::model
