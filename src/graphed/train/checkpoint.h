// train/checkpoint.h — Megatron-style checkpoint folders: SAVE/iter_0000100/{model.safetensors,
// optimizer.safetensors, trainer.json} plus SAVE/latest_checkpointed_iteration.txt. A checkpoint is
// written into a temporary folder, fsynced and renamed into place, so a crash never leaves a partial
// one. trainer.json holds the iteration and the resolved configuration; optimizer.safetensors also
// holds the RNG states, so a resumed run continues with the same losses as an uninterrupted one.
#pragma once

#include <string>

#include "graphed/config/run_config.h"
#include "graphed/model/gpt_model.h"
#include "graphed/train/adamw.h"

namespace graphed::train {

/// Saves the state after `iteration` iterations; returns the checkpoint folder. Throws DataError
/// when it cannot be written (nothing partial is left).
std::string save_checkpoint(const std::string& save_dir, int64_t iteration, model::GptModel& model, AdamW& optimizer,
                            const config::RunConfig& config, const at::Device& device);

/// Loads the checkpoint that `load_dir` names (a --save folder, whose latest checkpoint is taken, or
/// one iter_* folder) into the model and optimizer; returns its iteration count. Throws DataError
/// naming the file and value when it is missing, corrupt, or was saved by a different model.
int64_t load_checkpoint(const std::string& load_dir, model::GptModel& model, AdamW& optimizer,
                        const config::RunConfig& config, const at::Device& device);

}  // namespace graphed::train
