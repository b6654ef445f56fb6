// train/checkpoint.h — Megatron-style checkpoint folders: SAVE/iter_0000100/{model.safetensors,
// optimizer.safetensors, trainer.json} plus SAVE/latest_checkpointed_iteration.txt. A checkpoint is
// written into a temporary folder, fsynced and renamed into place, so a crash never leaves a partial
// one. trainer.json holds the iteration and the resolved configuration; optimizer.safetensors also
// holds the RNG states, so a resumed run continues with the same losses as an uninterrupted one.
// Loading checks everything (docs/input-checks.md, "Checkpoints") before it changes the model.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "graphed/config/run_config.h"
#include "graphed/model/gpt_model.h"
#include "graphed/train/adamw.h"
#include "graphed/util/safetensors.h"

namespace graphed::train {

/// How the safetensors reader and writer word a checkpoint's problems and their fixes (every checkpoint file's).
SafetensorsWording checkpoint_wording();

/// The folder save_checkpoint writes for `iteration` under save_dir (iter_0000100).
std::string checkpoint_folder(const std::string& save_dir, int64_t iteration);
/// The folder the ranks write their moment runs into for the checkpoint of `iteration`, named with the process id of
/// the rank that moves it in (iter_0000100.tmp-optimizer-shards-PID): a later save's sweep removes it once that
/// process is gone.
std::string optimizer_shards_staging(const std::string& save_dir, int64_t iteration, int64_t writer_pid);

/// Saves the state after `iteration` iterations; returns the checkpoint folder. First removes the
/// iter_*.tmp-PID folders that saves of killed runs left in save_dir: those whose PID is no live
/// process, and this process's own (its saves run one at a time); those of other live processes are
/// kept. Throws DataError when it cannot be written (nothing partial is left).
std::string save_checkpoint(const std::string& save_dir, int64_t iteration, model::GptModel& model, AdamW& optimizer,
                            const config::RunConfig& config, const at::Device& device);

/// The folder of a checkpoint that holds the distributed optimizer's Adam moments as the runs each rank wrote
/// (train/element_runs.h), one rank<global rank>.safetensors each; optimizer.safetensors then holds no moments.
inline constexpr const char* kOptimizerShardsFolder = "optimizer_shards";

/// save_checkpoint with the state given as (name, tensor) lists: the model's parameters and the optimizer's
/// state (AdamW::state() names), which a pipeline's rank 0 gathers from every stage. optimizer_shards: a folder the
/// ranks wrote their moment runs into, moved into the checkpoint as kOptimizerShardsFolder before it appears (removed
/// when the save fails); empty = none.
std::string save_checkpoint_tensors(const std::string& save_dir, int64_t iteration,
                                    const std::vector<std::pair<std::string, at::Tensor>>& parameters,
                                    std::vector<std::pair<std::string, at::Tensor>> optimizer_state,
                                    const config::RunConfig& config, const at::Device& device,
                                    const std::string& optimizer_shards = {});

/// A checkpoint folder found and its trainer.json read and checked.
struct CheckpointInfo {
  std::string folder;           ///< the iter_* folder (or the folder --load named, when it holds trainer.json)
  int64_t iteration = 0;        ///< iterations done when it was saved (trainer.json "iteration", >= 0)
  nlohmann::json config;        ///< trainer.json "config": the resolved settings of the run that saved it (an object)
  std::string graphed_version;  ///< trainer.json "graphed_version"; "" when absent
};

/// The iteration a --save folder's latest_checkpointed_iteration.txt names, or nullopt when it has none (or
/// one that does not hold an iteration number).
std::optional<int64_t> latest_saved_iteration(const std::string& save_dir);

/// Finds the checkpoint `load_dir` names (a --save folder → the iteration in its
/// latest_checkpointed_iteration.txt, or one iter_* folder) and reads its trainer.json, checking that it
/// is an object with an integer "iteration" >= 0, an object "config", and a string "graphed_version" if
/// present. Reads no tensors. Throws CheckpointError naming the file and field.
CheckpointInfo read_checkpoint_info(const std::string& load_dir);

/// Loads the checkpoint that `load_dir` names (see read_checkpoint_info) into the model and optimizer
/// and restores the RNG states; returns its iteration count. Nothing is changed unless every check
/// passes: the architecture settings match, both safetensors files are valid, every model parameter,
/// optimizer state and RNG state of this device is there with the exact dtype and shape, and there is
/// nothing else. Throws CheckpointError naming the file, the tensor or field, and what was expected.
/// own_stage: the optimizer holds one pipeline stage's parameters; the saved optimizer state of the other
/// stages' parameters (the model's own) is then skipped rather than refused.
/// Tensors a run keeps across steps beside the optimizer's (FP8 delayed scaling: "fp8.*"), saved in the
/// optimizer's file. A load copies each where the checkpoint has it with the same dtype and shape, and lists
/// the others in `missing` (left as they were: a bf16 checkpoint resumed in FP8, or another history length).
/// A checkpoint's optional tensors that the run has no use for are skipped.
struct OptionalState {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::vector<std::string> missing;
};

int64_t load_checkpoint(const std::string& load_dir, model::GptModel& model, AdamW& optimizer,
                        const config::RunConfig& config, const at::Device& device, bool own_stage = false,
                        OptionalState* optional = nullptr);
/// load_checkpoint into (name, tensor) lists of the whole shapes, which the caller then spreads (a
/// tensor-parallel rank takes its shards of them): the same checks and the same RNG restore.
/// after_checks: runs with the checkpoint folder once every check here has passed, before anything is copied (the
/// caller's own checks of what else it reads there).
int64_t load_checkpoint_tensors(const std::string& load_dir,
                                const std::vector<std::pair<std::string, at::Tensor>>& model_parameters,
                                const std::vector<std::pair<std::string, at::Tensor>>& optimizer_state,
                                const config::RunConfig& config, const at::Device& device, bool own_stage,
                                OptionalState* optional = nullptr,
                                const std::function<void(const std::string& folder)>& after_checks = {});

/// Loads only the model weights of the checkpoint `load_dir` names (for inference): the same checks
/// as load_checkpoint on model.safetensors; the optimizer file is not read. Returns its iteration count.
int64_t load_model_weights(const std::string& load_dir, model::GptModel& model, const config::RunConfig& config);

}  // namespace graphed::train
