// train/trainer_state.cpp — the Trainer's optimizer and the state it saves: AdamW built over this rank's
// parameters (sharded over the data-parallel ranks with --use-distributed-optimizer, train/gradient_shards.h), and
// checkpoints, which hold one process's whole state whatever the layout (the distributed optimizer's moments written
// by each rank itself where the ranks share the --save folder and hold whole parameters: train/element_runs.h).
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>

#include <unistd.h>

#include "graphed/model/fused_path.h"
#include "graphed/train/checkpoint.h"
#include "graphed/train/pipeline_checkpoint.h"
#include "graphed/train/trainer.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/logging.h"

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
  OptionalState carried{carried_state_, {}};
  state_not_in_checkpoint_.clear();
  for (const auto& [name, tensor] : carried_state_) state_not_in_checkpoint_.push_back(name);
  // With the distributed optimizer the moments, and the parameters it keeps only shards of, are read whole into fresh
  // tensors (on the host where this rank holds every parameter whole: nothing joins them), and each rank keeps its
  // shards; where the checkpoint holds the moments as the saving ranks' runs and this rank's parameters are whole, it
  // reads only the runs its own shards overlap, straight into them.
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
  // Which kind of checkpoint decides what to read; the runs themselves are indexed and checked once the checkpoint's
  // own checks have passed (its architecture first), in the folder those checks read.
  const std::string folder = read_checkpoint_info(dir).folder;
  const bool stored = is_directory(join_path(folder, kOptimizerShardsFolder));
  const bool own_runs = stored && shards_ && joins_to_whole().empty();
  const NamedTensorList state = own_runs  ? shards_->state_without_moments()
                                : shards_ ? shards_->empty_whole_state(whole_on)
                                          : optimizer_->state();
  start_iteration_ = read_state(dir, folder, parameters, state, stored, own_runs, carried);
  if (layout_.holds_whole_model()) state_not_in_checkpoint_ = carried.missing;
  if (shards_ && !own_runs) shards_->keep_own_state(state);
  for (const auto& [index, values] : released) optimizer_->write_released(index, values);
  optimizer_->refresh_working_copies();
  model_->weights_loaded();  // e.g. the FP8 casts of the weights, from the loaded ones
}

namespace {

bool is_moment(const std::string& name) {
  const auto ends_with = [&](const std::string& suffix) {
    return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".exp_avg") || ends_with(".exp_avg_sq");
}

/// `state` split into what optimizer.safetensors holds and, where the moments are stored as runs, the moments as
/// whole runs to read after it.
std::pair<NamedTensorList, std::vector<ElementRun>> split_moments(const NamedTensorList& state, bool stored) {
  if (!stored) return {state, {}};
  NamedTensorList in_file;
  std::vector<ElementRun> runs;
  for (const auto& [name, tensor] : state) {
    if (is_moment(name)) {
      runs.push_back({name, 0, tensor.view({-1})});
    } else {
      in_file.emplace_back(name, tensor);
    }
  }
  return {in_file, runs};
}

}  // namespace

int64_t Trainer::read_state(const std::string& dir, const std::string& folder, const NamedTensorList& parameters,
                            const NamedTensorList& state, bool stored, bool own_runs, OptionalState& carried) {
  const bool own_stage = layout_.is_pipelined();
  const GroupJoins joins = joins_to_whole();
  const std::vector<NamedTensorList> parameter_levels = whole_levels(parameters, joins);
  const std::vector<NamedTensorList> state_levels = whole_levels(state, joins);
  auto [in_file, runs] = split_moments(state_levels.back(), stored);
  if (own_runs) runs = shards_->own_moment_runs();
  std::optional<ElementRunIndex> index;
  const auto check_runs = [&](const std::string& checked) {  // before anything changes
    if (!stored) return;
    if (checked != folder) {
      throw CheckpointError("the checkpoint --load names changed while it was read ('" + folder + "', then '" +
                            checked + "'); fix: load again once the run saving into that folder has finished");
    }
    index.emplace(join_path(folder, kOptimizerShardsFolder));
    index->check_covers(runs);
  };
  const int64_t iteration = load_checkpoint_tensors(dir, parameter_levels.back(), in_file, config_, device_, own_stage,
                                                    layout_.holds_whole_model() ? &carried : nullptr, check_runs);
  if (index) index->read_into(runs);
  if (!joins.empty()) {  // the whole tensors were read: each rank keeps its part
    keep_own_parts_through(parameter_levels, joins);
    keep_own_parts_through(state_levels, joins);
  }
  return iteration;
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
  complete_parameter_gathers();
  if (saves_moments_per_rank()) {
    const std::string runs_folder = shards_folder(iterations);
    if (every_rank_sees(runs_folder)) return save_moments_per_rank(iterations, runs_folder);
  }
  // Collective over the data-parallel ranks with the distributed optimizer, so before any rank turns back: the
  // ranks that write nothing take part without keeping the result; the host keeps it where this rank holds every
  // parameter whole, the device where the pipeline's or the tensor group's collectives join it.
  std::optional<at::Device> whole_on;
  if (layout_.joins_checkpoint()) whole_on = layout_.holds_whole_model() ? at::Device(at::kCPU) : device_;
  NamedTensorList state = shards_ ? shards_->whole_state(whole_on) : optimizer_->state();
  NamedTensorList parameters = shards_ ? shards_->whole_parameters(model_parameters(), whole_on) : model_parameters();
  return write_joined(iterations, std::move(parameters), std::move(state), {});
}

bool Trainer::saves_moments_per_rank() const {
  return shards_ != nullptr && layout_.tensor_size == 1 && layout_.expert_size == 1;
}

void Trainer::agree_on(const std::optional<std::string>& failure, const std::string& what) {
  at::Tensor failed = at::full({1}, failure ? 1.0 : 0.0, at::TensorOptions().dtype(at::kFloat).device(device_));
  groups_->world().all_reduce_max(failed).wait();
  if (failed.item<float>() == 0.0F) return;  // the host waits for every rank's verdict here
  if (failure) throw DataError(*failure);
  throw DataError("cannot save the checkpoint: another rank could not " + what +
                  " (its message says why); fix: check that the --save folder is writable and has space on every node");
}

std::string Trainer::shards_folder(int64_t iterations) {
  at::Tensor pid = at::full({1}, is_main_rank() ? static_cast<int64_t>(::getpid()) : 0,
                            at::TensorOptions().dtype(at::kLong).device(device_));
  groups_->world().all_reduce_max(pid).wait();
  return optimizer_shards_staging(*config_.train.save, iterations, pid.item<int64_t>());
}

bool Trainer::every_rank_sees(const std::string& folder) {
  // Rank 0 makes the folder and leaves a token in it; a rank sees it when it reads the same token there (a folder of
  // the same name on another node's own disk holds another, or none).
  std::optional<std::string> failure;
  const auto token = static_cast<int64_t>(std::random_device()() & 0x7fffffff) + 1;
  if (is_main_rank()) {
    remove_all(folder);  // a killed save's
    std::string step;
    if (const int error = create_directories(folder)) {
      failure = "cannot save the checkpoint: creating '" + folder + "': " + std::strerror(error) +
                "; fix: check that the --save folder is writable and has space";
    } else if (const int failed = write_file_atomically(join_path(folder, "token"), std::to_string(token), &step)) {
      failure = "cannot save the checkpoint: " + step + ": " + std::strerror(failed) +
                "; fix: check that the --save folder is writable and has space";
    }
  }
  agree_on(failure, "create the folder of the optimizer's shards");
  at::Tensor shared = at::full({1}, is_main_rank() ? token : 0, at::TensorOptions().dtype(at::kLong).device(device_));
  groups_->world().all_reduce_max(shared).wait();
  std::string seen;
  read_file(join_path(folder, "token"), seen);
  at::Tensor blind = at::full({1}, seen == std::to_string(shared.item<int64_t>()) ? 0 : 1,
                              at::TensorOptions().dtype(at::kLong).device(device_));
  groups_->world().all_reduce_max(blind).wait();
  if (blind.item<int64_t>() == 0) return true;
  if (is_main_rank()) {
    remove_all(folder);
    log_info(
        "the --save folder is not one file system for every rank: rank 0 writes the whole optimizer state (with "
        "a --save folder every node shares, each rank writes its own shards)");
  }
  return false;
}

std::string Trainer::save_moments_per_rank(int64_t iterations, const std::string& runs_folder) {
  // Every rank writes its shards of the moments into one folder (on a file system all of them see), which rank 0 moves
  // into the checkpoint once each has written; the rest is joined to rank 0 and written there, as without.
  std::optional<std::string> failure;
  if (is_main_rank()) remove_all(join_path(runs_folder, "token"));
  std::vector<int64_t> skipped;  // the tied embedding's moments, alike on the first and last stage: the first's
  if (layout_.is_pipelined() && layout_.pipeline_rank() != 0) {
    for (std::size_t i = 0; i < optimizer_->names().size(); ++i) {
      if (optimizer_->names()[i] == "word_embeddings") skipped.push_back(static_cast<int64_t>(i));
    }
  }
  try {
    const std::string file = "rank" + std::to_string(groups_->world().rank()) + ".safetensors";
    write_element_runs(join_path(runs_folder, file), shards_->own_moment_runs(skipped));
  } catch (const DataError& error) {
    failure = error.what();
  }
  try {
    agree_on(failure, "write its shards of the optimizer's moments");
  } catch (const DataError&) {
    if (is_main_rank()) remove_all(runs_folder);  // what the others wrote: nothing will read it
    throw;
  }
  if (is_main_rank()) fsync_path(runs_folder);  // the files' names, before the folder moves into the checkpoint
  std::optional<at::Device> whole_on;
  if (layout_.joins_checkpoint()) whole_on = layout_.holds_whole_model() ? at::Device(at::kCPU) : device_;
  NamedTensorList parameters = shards_->whole_parameters(model_parameters(), whole_on);
  return write_joined(iterations, std::move(parameters), shards_->state_without_moments(), runs_folder);
}

std::string Trainer::write_joined(int64_t iterations, NamedTensorList parameters, NamedTensorList state,
                                  const std::string& optimizer_shards) {
  const std::string& folder = *config_.train.save;
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
  return save_checkpoint_tensors(folder, iterations, parameters, state, config_, device_, optimizer_shards);
}

}  // namespace graphed::train
