// train/trainer_state.cpp — the Trainer's optimizer and the state it saves: AdamW built over this rank's
// parameters (sharded over the data-parallel ranks with --use-distributed-optimizer, train/gradient_shards.h), and
// checkpoints, which hold one process's whole state whatever the layout.
#include <algorithm>
#include <map>
#include <optional>

#include "graphed/model/fused_path.h"
#include "graphed/train/checkpoint.h"
#include "graphed/train/pipeline_checkpoint.h"
#include "graphed/train/trainer.h"

namespace graphed::train {
namespace {

/// The distributed optimizer's layouts of the optimizer's parameters (Megatron's buckets over the data-parallel
/// ranks, the experts' over the expert-data ranks), or none without it. Megatron cuts buckets of its default size
/// only with --overlap-grad-reduce and on the first pipeline stage; else one bucket per buffer. With working copies
/// (`fused`) each rank keeps only its shards of the fp32 values of the parameters the model reads through them alone.
std::optional<ShardedLayouts> distributed_optimizer_layouts(
    const config::TrainConfig& t, dist::ProcessGroups* groups,
    const std::vector<std::pair<std::string, at::Tensor>>& parameters, int64_t expert_parameters,
    const at::Tensor& shared_embedding, bool fused) {
  if (groups == nullptr || !t.use_distributed_optimizer) return std::nullopt;
  const dist::ParallelLayout& layout = groups->layout();
  ShardingOptions options;
  options.data_parallel_size = layout.data_size;
  options.expert_data_parallel_size = layout.expert_size > 1 ? groups->expert_data().size() : 1;
  options.expert_parameters = expert_parameters;
  if (t.overlap_grad_reduce && layout.pipeline_rank() == 0)
    options.bucket_size = std::max<int64_t>(40'000'000, 1'000'000 * layout.data_size);
  std::vector<int64_t> sizes;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    sizes.push_back(parameters[i].second.numel());
    options.released.push_back(fused && model::reads_only_working_copy(parameters[i].first));
    if (shared_embedding.defined() && parameters[i].second.is_same(shared_embedding))
      options.tied_embedding = static_cast<int64_t>(i);
  }
  return lay_out_shards(sizes, options);
}

}  // namespace

void Trainer::make_optimizer(NamedTensorList parameters, int64_t expert_parameters, const at::Tensor& shared_embedding,
                             bool fused) {
  const config::TrainConfig& t = config_.train;
  AdamWOptions options;
  options.beta1 = t.adam_beta1;
  options.beta2 = t.adam_beta2;
  options.eps = t.adam_eps;
  options.weight_decay = t.weight_decay;
  if (fused) options.working_copies = at::kBFloat16;
  const std::optional<ShardedLayouts> sharded =
      distributed_optimizer_layouts(t, groups_, parameters, expert_parameters, shared_embedding, fused);
  if (sharded) {
    const int64_t expert_data_rank = layout_.expert_size > 1 ? groups_->expert_data().rank() : 0;
    options.flat_layout = flat_layout_of(*sharded, layout_.data_rank(), expert_data_rank);
  }
  optimizer_ = std::make_unique<AdamW>(std::move(parameters), options);
  if (sharded) {
    dist::Communicator* expert_data = layout_.expert_size > 1 ? &groups_->expert_data() : nullptr;
    shards_ = std::make_unique<GradientShards>(groups_->data(), expert_data, *sharded, *optimizer_);
  }
}

GroupJoins Trainer::joins_to_whole() const {
  GroupJoins joins;
  // Who joins: the first expert-data rank's expert groups, then the first data rank's tensor groups.
  if (layout_.expert_size > 1) {
    joins.push_back({model_->expert_splits(),
                     {layout_.expert_size, layout_.expert_rank()},
                     &groups_->expert(),
                     device_,
                     layout_.expert_data_rank() == 0});
  }
  if (layout_.tensor_size > 1) {
    joins.push_back({model_->tensor_splits(),
                     {layout_.tensor_size, layout_.tensor_rank()},
                     &groups_->tensor(),
                     device_,
                     layout_.data_rank() == 0});
  }
  return joins;
}

int64_t Trainer::whole_parameter_count() const {
  const GroupJoins joins = joins_to_whole();
  int64_t count = 0;
  for (const auto& item : model_->named_parameters()) count += whole_numel(item.key(), item.value(), joins);
  return count;
}

void Trainer::load(const std::string& dir) {
  const bool own_stage = layout_.is_pipelined();
  OptionalState carried{carried_state_, {}};
  state_not_in_checkpoint_.clear();
  for (const auto& [name, tensor] : carried_state_) state_not_in_checkpoint_.push_back(name);
  // With the distributed optimizer the moments, and the parameters it keeps only shards of, are read whole into fresh
  // tensors (on the host where this rank holds every parameter whole: nothing joins them), and each rank keeps its
  // shards.
  const at::Device whole_on = layout_.holds_whole_model() ? at::Device(at::kCPU) : device_;
  NamedTensorList parameters = model_parameters();
  std::vector<std::pair<std::size_t, at::Tensor>> released;
  std::map<std::string, std::size_t> index_of;
  for (std::size_t i = 0; i < optimizer_->names().size(); ++i) index_of.emplace(optimizer_->names()[i], i);
  for (auto& [name, tensor] : parameters) {
    const auto found = index_of.find(name);
    if (found == index_of.end() || !optimizer_->released(found->second)) continue;
    tensor = at::zeros(tensor.sizes(), tensor.options().device(whole_on));
    released.emplace_back(found->second, tensor);
  }
  const NamedTensorList state = shards_ ? shards_->empty_whole_state(whole_on) : optimizer_->state();
  if (layout_.holds_whole_model()) {
    start_iteration_ = load_checkpoint_tensors(dir, parameters, state, config_, device_, own_stage, &carried);
    state_not_in_checkpoint_ = carried.missing;
  } else if (const GroupJoins joins = joins_to_whole(); joins.empty()) {
    start_iteration_ = load_checkpoint_tensors(dir, parameters, state, config_, device_, own_stage);
  } else {  // the whole tensors are read, then each rank keeps its part
    const std::vector<NamedTensorList> parameter_levels = whole_levels(parameters, joins);
    const std::vector<NamedTensorList> state_levels = whole_levels(state, joins);
    start_iteration_ =
        load_checkpoint_tensors(dir, parameter_levels.back(), state_levels.back(), config_, device_, own_stage);
    keep_own_parts_through(parameter_levels, joins);
    keep_own_parts_through(state_levels, joins);
  }
  if (shards_) shards_->keep_own_state(state);
  for (const auto& [index, values] : released) optimizer_->write_released(index, values);
  optimizer_->refresh_working_copies();
  model_->weights_loaded();  // e.g. the FP8 casts of the weights, from the loaded ones
}

NamedTensorList Trainer::model_parameters() const {
  NamedTensorList parameters;
  for (const auto& item : model_->named_parameters()) parameters.emplace_back(item.key(), item.value());
  return parameters;
}

void Trainer::complete_parameter_gathers() {
  if (!weights_stale_) return;
  shards_->gather_parameters();
  weights_stale_ = false;
}

std::string Trainer::save(int64_t iterations) {
  const std::string& folder = *config_.train.save;
  complete_parameter_gathers();
  // Collective over the data-parallel ranks with the distributed optimizer, so before any rank turns back: the
  // ranks that write nothing take part without keeping the result; the host keeps it where this rank holds every
  // parameter whole, the device where the pipeline's or the tensor group's collectives join it.
  std::optional<at::Device> whole_on;
  if (layout_.joins_checkpoint()) whole_on = layout_.holds_whole_model() ? at::Device(at::kCPU) : device_;
  NamedTensorList state = shards_ ? shards_->whole_state(whole_on) : optimizer_->state();
  NamedTensorList parameters = shards_ ? shards_->whole_parameters(model_parameters(), whole_on) : model_parameters();
  // The first data-parallel rank's shares (under expert parallelism the first expert group's): gathered from
  // every pipeline stage to the first (each tensor and expert rank its own part), then joined over the first
  // stage's expert group and tensor group in turn; rank 0 writes what one process would.
  if (!layout_.joins_checkpoint()) return checkpoint_folder(folder, iterations);
  if (layout_.is_pipelined()) {
    GatheredState gathered =
        gather_pipeline_state(parameters, state, *groups_, !config_.model.untie_embeddings_and_output_weights);
    parameters = std::move(gathered.parameters);
    state = std::move(gathered.optimizer_state);
    if (layout_.pipeline_rank() != 0) return checkpoint_folder(folder, iterations);
  }
  if (const GroupJoins joins = joins_to_whole(); !joins.empty()) {
    parameters = join_through(parameters, joins);
    state = join_through(state, joins);
  }
  if (!is_main_rank()) return checkpoint_folder(folder, iterations);
  // The paths' carried state (FP8's) is saved where every data-parallel rank holds the whole state.
  if (layout_.holds_whole_model()) state.insert(state.end(), carried_state_.begin(), carried_state_.end());
  return save_checkpoint_tensors(folder, iterations, parameters, state, config_, device_);
}

}  // namespace graphed::train
