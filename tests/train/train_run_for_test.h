// tests/train/train_run_for_test.h — what the GPU training comparisons share: a preset's resolved
// config with test overrides, the record of a run (losses, final parameters, evaluation loss), and
// bitwise comparison of two runs.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphed/config/presets.h"
#include "graphed/config/run_config.h"

namespace graphed::testing {

struct TrainRun {
  std::vector<double> losses;
  std::vector<at::Tensor> parameters;
  double evaluation = 0;
  int64_t graphs = 0;
};

/// The preset on mock data with 5 evaluation iterations and 60 planned steps, then the overrides.
inline config::RunConfig preset_config(const std::string& preset, const nlohmann::json& overrides) {
  config::Settings settings;
  config::apply_settings(settings, *config::preset_settings(preset), "preset " + preset);
  config::apply_settings(settings, {{"mock_data", true}, {"eval_iters", 5}, {"train_iters", 60}}, "test");
  config::apply_settings(settings, overrides, "test");
  return config::resolve_run_config_or_throw(settings);
}

inline double max_difference(const TrainRun& a, const TrainRun& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.losses.size() && i < b.losses.size(); ++i) {
    worst = std::max(worst, std::abs(a.losses[i] - b.losses[i]));
  }
  return worst;
}

inline bool bitwise_equal(const TrainRun& a, const TrainRun& b) {
  if (a.losses != b.losses || a.evaluation != b.evaluation || a.parameters.size() != b.parameters.size()) return false;
  for (std::size_t i = 0; i < a.parameters.size(); ++i) {
    if (!at::equal(a.parameters[i], b.parameters[i])) return false;
  }
  return true;
}

}  // namespace graphed::testing
