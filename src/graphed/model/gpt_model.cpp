// model/gpt_model.cpp — see model/gpt_model.h.
#include "graphed/model/gpt_model.h"

#include "graphed/model/decode_kernel_path.h"
#include "graphed/model/fp8_weights_path.h"
#include "graphed/model/moe.h"

#include <algorithm>
#include <limits>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/container/modulelist.h>

#include "graphed/kernels/decode_ops.h"
#include "graphed/kernels/training_ops.h"
#include "graphed/util/error.h"

namespace graphed::model {
namespace {

std::size_t slot(StageUnit unit) { return static_cast<std::size_t>(unit); }

}  // namespace

std::vector<LayerParts> decoder_layer_parts(const config::ModelConfig& config, const std::vector<bool>& moe_layers) {
  std::vector<LayerParts> parts;
  for (int64_t i = 0; i < config.num_layers; ++i) {
    if (config.is_hybrid_model) {
      const std::string& pattern = config.hybrid_override_pattern.value_or("");
      GRAPHED_INTERNAL_ASSERT(static_cast<int64_t>(pattern.size()) == config.num_layers,
                              "a hybrid model without a resolved pattern of ", config.num_layers, " layers");
      parts.push_back(hybrid_parts(pattern[static_cast<std::size_t>(i)]));
    } else {
      parts.push_back(
          transformer_parts(i < static_cast<int64_t>(moe_layers.size()) && moe_layers[static_cast<std::size_t>(i)]));
    }
  }
  return parts;
}

const char* to_string(StageUnit unit) {
  switch (unit) {
    case StageUnit::kEmbedding: return "embedding";
    case StageUnit::kLoss: return "loss";
  }
  return "unknown";
}

GptModelImpl::GptModelImpl(const config::ModelConfig& config, const std::vector<bool>& moe_layers) : config_(config) {
  const int64_t h = config.hidden_size;
  word_embeddings_ = register_parameter("word_embeddings", at::randn({config.vocab_size, h}) * config.init_method_std);
  if (config.position_embedding_type == config::PositionEmbedding::kLearnedAbsolute) {
    position_embeddings_ = register_parameter(
        "position_embeddings",
        at::randn({config.max_position_embeddings.value_or(config.seq_length), h}) * config.init_method_std);
  }
  layer_list_ = register_module("layers", torch::nn::ModuleList());
  const std::vector<LayerParts> parts = decoder_layer_parts(config, moe_layers);
  for (int64_t i = 0; i < config.num_layers; ++i) {
    layers_.emplace_back(config, i + 1, parts[static_cast<std::size_t>(i)]);
    layer_list_->push_back(layers_.back());
  }
  final_norm_ = register_module("final_norm",
                                Norm(h, config.normalization == config::Normalization::kRmsNorm, config.norm_epsilon));
  if (config.untie_embeddings_and_output_weights) {
    output_weight_ = register_parameter("output_weight", at::randn({config.vocab_size, h}) * config.init_method_std);
  }
  use_eager_stage_runner(StageUnit::kEmbedding);
  use_eager_stage_runner(StageUnit::kLoss);
  // --no-fused-kernels: LibTorch's ops alone, inference included.
  use_kernel_path(config.fused_kernels ? with_decode_kernels(aten_path()) : aten_path());
}

at::Tensor GptModelImpl::embed(const at::Tensor& tokens) {
  // [b, s, h]; with sequence parallelism this rank's part of the sequence
  at::Tensor hidden = tensor_.embedding(word_embeddings_, tokens);
  if (position_embeddings_.defined()) {
    hidden = hidden + tensor_.sequence_part(position_embeddings_.narrow(0, 0, tokens.size(1)), 0);
  }
  if (config_.hidden_dropout > 0.0 && is_training()) {
    // With sequence parallelism each rank holds its part of the sequence: its own mask (Megatron's rule).
    const auto dropout = [&] { return at::dropout(hidden, config_.hidden_dropout, true); };
    hidden = tensor_.sequence_parallel() ? tensor_.with_rank_random(dropout) : dropout();
  }
  return hidden;
}

at::Tensor GptModelImpl::embed_at(const at::Tensor& tokens, const at::Tensor& positions) {
  const at::Tensor hidden = tensor_.embedding(word_embeddings_, tokens);  // [b, s, h]
  if (!position_embeddings_.defined()) return hidden;
  return hidden + at::embedding(position_embeddings_, positions);
}

at::Tensor GptModelImpl::output_logits_part(const at::Tensor& hidden) {
  const at::Tensor normed = tensor_.enter(final_norm_->forward(hidden));  // the output layer is column-parallel
  const at::Tensor& output = output_layer_weight();
  return path_->logits(normed, output);
}

at::Tensor GptModelImpl::output_logits(const at::Tensor& hidden) { return tensor_.gather(output_logits_part(hidden)); }

at::Tensor GptModelImpl::decode_logits(const at::Tensor& hidden) {
  const at::Tensor logits = final_norm_->then_linear(hidden, output_layer_weight(), {});
  return tensor_.gather(logits.to(at::promote_types(logits.scalar_type(), at::kFloat)));
}

at::Tensor GptModelImpl::lm_loss(const at::Tensor& hidden, const at::Tensor& labels) {
  if (path_->fuses_output_loss() &&
      tensor_.size() == 1) {  // the output layer and the loss in one, never holding fp32 logits
    const at::Tensor normed = final_norm_->forward(hidden);
    const at::Tensor& output = output_layer_weight();
    return path_->linear_cross_entropy(normed.reshape({-1, normed.size(-1)}), output, labels.reshape({-1}));
  }
  const at::Tensor logits = output_logits_part(hidden);  // the whole logits with one rank
  return tensor_.cross_entropy(logits.view({-1, logits.size(-1)}), labels.reshape({-1}));
}

at::Tensor GptModelImpl::logits(const at::Tensor& tokens) {
  at::Tensor hidden = embed(tokens);
  for (auto& layer : layers_) hidden = layer->forward(hidden, 0).first;
  return output_logits(hidden);
}

ChunkOutput GptModelImpl::forward_chunk(const LayerRange& range, const at::Tensor& input, const at::Tensor& labels,
                                        int64_t microbatch) {
  ChunkOutput out;
  at::Tensor hidden =
      range.first_stage ? stage_runners_[slot(StageUnit::kEmbedding)]->run({input}, microbatch)[0] : input;
  for (int64_t l = range.first_layer; l < range.end_layer; ++l) {
    auto [next, layer_aux] = layers_[static_cast<std::size_t>(l)]->forward(hidden, microbatch);
    hidden = next;
    if (layer_aux.defined()) out.aux_loss = out.aux_loss.defined() ? out.aux_loss + layer_aux : layer_aux;
  }
  if (range.last_stage) {
    out.lm_loss = stage_runners_[slot(StageUnit::kLoss)]->run({hidden, labels}, microbatch)[0];
  } else {
    out.hidden = hidden;
  }
  return out;
}

GptOutput GptModelImpl::forward(const at::Tensor& tokens, const at::Tensor& labels, int64_t microbatch) {
  GptOutput out;
  at::Tensor hidden = stage_runners_[slot(StageUnit::kEmbedding)]->run({tokens}, microbatch)[0];
  for (auto& layer : layers_) {
    auto [next, layer_aux] = layer->forward(hidden, microbatch);
    hidden = next;
    if (layer_aux.defined()) out.aux_loss = out.aux_loss.defined() ? out.aux_loss + layer_aux : layer_aux;
  }
  out.lm_loss = stage_runners_[slot(StageUnit::kLoss)]->run({hidden, labels}, microbatch)[0];
  out.loss = out.aux_loss.defined() ? out.lm_loss + out.aux_loss : out.lm_loss;
  return out;
}

capture::GraphableUnit GptModelImpl::stage_unit(StageUnit which) {
  capture::GraphableUnit unit;
  unit.name = to_string(which);
  const auto add = [&](const std::string& name, const at::Tensor& parameter) {
    if (!parameter.defined()) return;
    unit.parameter_names.push_back(name);
    unit.parameters.push_back(parameter);
  };
  if (which == StageUnit::kEmbedding) {
    add("word_embeddings", word_embeddings_);
    add("position_embeddings", position_embeddings_);
    unit.input_names = {"tokens"};
    unit.forward = [this](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{embed(in.at(0))}; };
    return unit;
  }
  for (const auto& item : final_norm_->named_parameters()) add("final_norm." + item.key(), item.value());
  add(output_weight_.defined() ? "output_weight" : "word_embeddings", output_layer_weight());
  unit.input_names = {"hidden", "labels"};
  unit.forward = [this](const std::vector<at::Tensor>& in) {
    return std::vector<at::Tensor>{lm_loss(in.at(0), in.at(1))};
  };
  return unit;
}

void GptModelImpl::set_stage_runner(StageUnit which, std::shared_ptr<capture::UnitRunner> runner) {
  GRAPHED_INTERNAL_ASSERT(runner != nullptr, "the ", to_string(which), " unit always needs a runner");
  stage_runners_[slot(which)] = std::move(runner);
}

void GptModelImpl::use_kernel_path(std::shared_ptr<const KernelPath> path) {
  GRAPHED_INTERNAL_ASSERT(path != nullptr, "a model needs a kernel path (model::aten_path() for LibTorch's ops)");
  path_ = std::move(path);
  for (auto& layer : layers_) layer->use_kernel_path(path_);
  final_norm_->use_kernel_path(path_);
  layer_paths_.clear();
}

void GptModelImpl::use_layer_kernel_paths(
    const std::function<std::shared_ptr<const KernelPath>(int64_t layer_number)>& path_of) {
  layer_paths_.clear();
  for (auto& layer : layers_) {
    std::shared_ptr<const KernelPath> path = path_of(layer->layer_number());
    GRAPHED_INTERNAL_ASSERT(path != nullptr, "layer ", layer->layer_number(), " was given no kernel path");
    layer->use_kernel_path(path);
    layer_paths_.push_back(std::move(path));
  }
}

std::shared_ptr<const Fp8WeightsPath> GptModelImpl::use_fp8_weights() {
  std::vector<at::Tensor> weights;
  for (auto& layer : layers_) {
    for (const auto& parameter : layer->named_parameters()) {
      if (parameter.value().dim() == 2 && parameter.key().find("expert") == std::string::npos &&
          parameter.key().find("router") == std::string::npos) {
        weights.push_back(parameter.value());
      }
    }
  }
  weights.push_back(output_layer_weight());
  auto path = std::make_shared<const Fp8WeightsPath>(path_, weights);
  use_kernel_path(path);
  return path;
}

void GptModelImpl::for_each_path(const std::function<void(const KernelPath&)>& visit) const {
  std::vector<const KernelPath*> done{path_.get()};
  visit(*path_);
  for (const auto& path : layer_paths_) {
    if (std::find(done.begin(), done.end(), path.get()) != done.end()) continue;
    visit(*path);
    done.push_back(path.get());
  }
}

void GptModelImpl::end_step() {
  for_each_path([](const KernelPath& path) { path.end_step(); });
}

void GptModelImpl::weights_loaded() {
  for_each_path([](const KernelPath& path) { path.weights_loaded(); });
}

void GptModelImpl::split_for_tensor_parallel(std::shared_ptr<TensorCollectives> collectives, bool sequence_parallel,
                                             std::shared_ptr<capture::RandomStream> random, bool split_experts) {
  GRAPHED_INTERNAL_ASSERT(tensor_.size() == 1 && collectives != nullptr, "a model split twice");
  if (!split_experts) {
    for (const auto& module : modules(/*include_self=*/false)) {
      if (auto* moe = module->as<MoeImpl>()) moe->keep_experts_whole();
    }
  }
  tensor_ = TensorParallel(std::move(collectives), sequence_parallel, std::move(random));
  for (auto& layer : layers_) layer->split_for_tensor_parallel(tensor_);
  const auto splits = tensor_splits();  // the layers' names too: keep_own_shards takes only the model's own
  keep_own_shards(*this, {splits.begin(), splits.end()}, tensor_.shard());
}

void GptModelImpl::split_for_expert_parallel(std::shared_ptr<ExpertCollectives> collectives) {
  GRAPHED_INTERNAL_ASSERT(collectives != nullptr, "expert parallelism without an expert group");
  const ExpertParallel expert(std::move(collectives));
  // The fixed expert blocks' paged stash: one for every MoE layer, as Megatron's pool is one per rank.
  if (config_.moe_paged_stash && config_.moe_expert_rank_capacity_factor) {
    kernels::PagedStashOptions options;
    options.page_rows = config_.moe_paged_stash_page_size;
    options.size_factor = config_.moe_paged_stash_buffer_size_factor_cuda;
    paged_stash_ = std::make_shared<kernels::PagedStash>(options);
  }
  for (const auto& module : modules(/*include_self=*/false)) {
    auto* moe = module->as<MoeImpl>();
    if (moe == nullptr) continue;
    moe->split_for_expert_parallel(expert);
    if (paged_stash_) moe->use_paged_stash(paged_stash_);
  }
}

std::map<std::string, ParameterSplit> GptModelImpl::expert_splits() const {
  std::map<std::string, ParameterSplit> splits;
  for (const auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    const auto* moe = item.value()->as<MoeImpl>();
    if (moe == nullptr) continue;
    for (const auto& [name, split] : moe->expert_splits()) splits.emplace(item.key() + "." + name, split);
  }
  return splits;
}

at::Tensor GptModelImpl::take_moe_overflow() {
  at::Tensor overflow;
  for (const auto& module : modules(/*include_self=*/false)) {
    auto* moe = module->as<MoeImpl>();
    const at::Tensor taken = moe != nullptr ? moe->take_overflow() : at::Tensor();
    if (taken.defined()) overflow = overflow.defined() ? at::maximum(overflow, taken) : taken;
  }
  const at::Tensor stash = paged_stash_ ? paged_stash_->overflowed() : at::Tensor();
  if (!overflow.defined() && !stash.defined()) return overflow;
  const auto options = (overflow.defined() ? overflow : stash).options();
  if (!overflow.defined()) overflow = at::zeros({2}, options);
  const at::Tensor all = at::cat({overflow, stash.defined() ? stash.reshape({1}).clone() : at::zeros({1}, options)});
  if (stash.defined()) stash.zero_();
  return all;
}

void GptModelImpl::use_dropless_experts(bool dropless) {
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* moe = module->as<MoeImpl>()) moe->use_dropless_dispatch(dropless);
  }
}

void GptModelImpl::pad_vocabulary(int64_t vocabulary) {
  GRAPHED_INTERNAL_ASSERT(vocabulary >= config_.vocab_size, "a vocabulary of ", config_.vocab_size, " padded to ",
                          vocabulary);
  const int64_t extra = vocabulary - config_.vocab_size;
  const auto pad = [extra](at::Tensor table) {  // zero rows after the real ones
    if (!table.defined()) return;
    table.set_data(at::cat({table.detach(), at::zeros({extra, table.size(1)}, table.options())}));
  };
  pad(word_embeddings_);
  pad(output_weight_);
  config_.vocab_size = vocabulary;
}

std::map<std::string, ParameterSplit> GptModelImpl::tensor_splits() const {
  std::map<std::string, ParameterSplit> splits = {{"word_embeddings", {TensorSplit::kColumn}}};
  if (output_weight_.defined()) splits.emplace("output_weight", ParameterSplit{TensorSplit::kColumn});
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    for (const auto& [name, split] : layers_[i]->tensor_splits()) {
      splits.emplace("layers." + std::to_string(i) + "." + name, split);
    }
  }
  return splits;
}

void GptModelImpl::use_eager_stage_runner(StageUnit which) {
  set_stage_runner(which, std::make_shared<capture::EagerUnitRunner>(stage_unit(which)));
}

namespace {

/// The next token from the last position's logits [vocab], on the CPU.
int64_t pick_token(at::Tensor logits, const Sampling& sampling, at::Generator& generator) {
  if (sampling.vocabulary > 0 && sampling.vocabulary < logits.size(0))
    logits = logits.narrow(0, 0, sampling.vocabulary);
  logits = logits.to(at::kDouble);
  if (sampling.temperature <= 0.0 || !at::isfinite(logits).all().item<bool>()) return logits.argmax(-1).item<int64_t>();
  logits = (logits - logits.max()) / sampling.temperature;  // the likeliest token at 0: finite for any temperature
  if (sampling.top_k > 0 && sampling.top_k < logits.size(0)) {
    const at::Tensor threshold = std::get<0>(logits.topk(sampling.top_k)).min();
    logits = logits.masked_fill(logits < threshold, -std::numeric_limits<float>::infinity());
  }
  return at::multinomial(at::softmax(logits, -1), 1, false, generator).item<int64_t>();
}

}  // namespace

std::vector<int64_t> GptModelImpl::generate(const std::vector<int64_t>& prompt, int64_t new_tokens,
                                            const Sampling& sampling) {
  const bool was_training = is_training();
  eval();
  at::NoGradGuard no_grad;
  at::Generator generator = at::detail::createCPUGenerator(sampling.seed);
  std::vector<int64_t> sequence = prompt;
  const auto device = word_embeddings_.device();
  for (int64_t step = 0; step < new_tokens; ++step) {
    const auto window =
        static_cast<int64_t>(std::min<std::size_t>(sequence.size(), static_cast<std::size_t>(config_.seq_length)));
    const std::vector<int64_t> context(sequence.end() - window, sequence.end());
    const at::Tensor input = at::tensor(context, at::kLong).view({1, window}).to(device);
    const at::Tensor last = logits(input).select(1, window - 1).squeeze(0).to(at::kCPU);
    sequence.push_back(pick_token(last, sampling, generator));
  }
  train(was_training);
  return sequence;
}

}  // namespace graphed::model
