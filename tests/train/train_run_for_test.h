// tests/train/train_run_for_test.h — what the GPU training comparisons share: a preset's resolved
// config with test overrides, the record of a run (losses, final parameters, evaluation loss), and
// bitwise comparison of two runs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphed/config/presets.h"
#include "graphed/config/run_config.h"
#include "graphed/train/trainer.h"

namespace graphed::testing {

struct TrainRun {
  std::vector<double> losses;
  std::vector<at::Tensor> parameters;
  double evaluation = 0;
  int64_t graphs = 0;             ///< after training
  int64_t graphs_evaluated = 0;   ///< after the evaluation too
  bool captured = false;          ///< the runner reported its capture
};

/// Trains `steps` iterations on the GPU, then evaluates once: losses, graphs, evaluation, parameters.
inline TrainRun train_on_gpu(const config::RunConfig& config, int steps) {
  train::Trainer trainer(config, train::TokenDataset::open(config.train, config.model, "", config.train.eval_iters),
                         at::Device(at::kCUDA, 0));
  TrainRun run;
  for (int it = 0; it < steps; ++it) run.losses.push_back(trainer.train_step(it).loss.item<double>());
  run.captured = trainer.runner().capture_report().has_value();
  run.graphs = trainer.runner().graph_count();
  run.evaluation = trainer.evaluate(0);
  run.graphs_evaluated = trainer.runner().graph_count();
  for (const auto& p : trainer.model()->parameters()) run.parameters.push_back(p.detach().clone());
  return run;
}

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

/// One per-layer graph comparison: a preset, the modules to graph, settings the eager and graphed runs
/// share (model and batch), and settings the graphed run alone gets.
struct GraphCase {
  std::string name;
  std::string preset;
  std::vector<std::string> modules;
  nlohmann::json model = nlohmann::json::object();
  nlohmann::json graphs = nlohmann::json::object();
};

/// Two microbatches per iteration, then the case's model settings.
inline nlohmann::json case_settings(const GraphCase& c) {
  nlohmann::json settings{{"global_batch_size", 2 * (c.preset == "tiny" ? 1 : 8)}};
  if (c.model.is_object()) settings.update(c.model);
  return settings;
}

/// The case's settings for a graphed run with this impl.
inline nlohmann::json graphed_settings(const GraphCase& c, const std::string& impl) {
  nlohmann::json settings = case_settings(c);
  settings.update({{"cuda_graph_impl", impl}, {"cuda_graph_modules", c.modules}});
  if (c.graphs.is_object()) settings.update(c.graphs);
  return settings;
}

/// The eager run of a case's model, computed once per process and checked bitwise reproducible.
inline const TrainRun& eager_run(const GraphCase& c, int steps) {
  static std::map<std::string, TrainRun> cache;
  const std::string key = c.preset + case_settings(c).dump() + std::to_string(steps);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  TrainRun first = train_on_gpu(preset_config(c.preset, case_settings(c)), steps);
  const TrainRun again = train_on_gpu(preset_config(c.preset, case_settings(c)), steps);
  EXPECT_TRUE(bitwise_equal(first, again)) << c.name << ": eager training is not bitwise reproducible on this GPU "
                                           << "(max loss difference " << max_difference(first, again) << ")";
  return cache.emplace(key, std::move(first)).first->second;
}

}  // namespace graphed::testing
