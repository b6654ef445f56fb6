// train/lr_schedule.h — Megatron's learning-rate schedule: linear warmup to --lr over
// --lr-warmup-iters, then constant, linear or cosine decay to --min-lr by --lr-decay-iters.
// A host-side function of the iteration; the trainer writes the value into a device tensor.
#pragma once

#include <cstdint>

#include "graphed/config/train_config.h"

namespace graphed::train {

/// The learning rate of 0-based iteration `iteration` (warmup counts iterations from 1).
double learning_rate(const config::TrainConfig& config, int64_t iteration);

}  // namespace graphed::train
