// train/lr_schedule.cpp — see train/lr_schedule.h.
#include "graphed/train/lr_schedule.h"

#include <cmath>

namespace graphed::train {

double learning_rate(const config::TrainConfig& config, int64_t iteration) {
  const double max_lr = config.lr;
  const double min_lr = config.min_lr;
  const int64_t step = iteration + 1;
  const int64_t warmup = config.lr_warmup_iters;
  const int64_t decay = config.lr_decay_iters.value_or(config.train_iters);
  if (warmup > 0 && step <= warmup) return max_lr * static_cast<double>(step) / static_cast<double>(warmup);
  if (config.lr_decay_style == "constant") return max_lr;
  if (step > decay) return min_lr;
  const double ratio = decay > warmup ? static_cast<double>(step - warmup) / static_cast<double>(decay - warmup) : 1.0;
  const double coefficient = config.lr_decay_style == "linear" ? 1.0 - ratio : 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return min_lr + coefficient * (max_lr - min_lr);
}

}  // namespace graphed::train
