// tests/train/train_run_for_test.h — what the GPU training comparisons share: a preset's resolved
// config with test overrides, the record of a run (losses, final parameters, evaluation loss), and
// bitwise comparison of two runs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphed/config/presets.h"
#include "graphed/config/run_config.h"
#include "graphed/train/trainer.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"

namespace graphed::testing {

struct TrainRun {
  std::vector<double> losses;
  std::vector<at::Tensor> parameters;
  double evaluation = 0;
  int64_t graphs = 0;            ///< after training
  int64_t graphs_evaluated = 0;  ///< after the evaluation too
  bool captured = false;         ///< the runner reported its capture
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
  config::apply_settings(
      settings, {{"mock_data", true}, {"eval_iters", 5}, {"train_iters", 60}, {"lr_warmup_iters", 20}}, "test");
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

/// moe-small's MoE layers made dropless (no capacity factor, no padding).
inline const nlohmann::json& dropless_moe() {
  static const nlohmann::json settings{{"moe_expert_capacity_factor", nullptr},
                                       {"moe_pad_expert_input_to_capacity", false}};
  return settings;
}

/// moe-small's MoE layers made dropless through the grouped GEMM (--moe-grouped-gemm): static shapes.
inline const nlohmann::json& grouped_dropless_moe() {
  static const nlohmann::json settings{
      {"moe_expert_capacity_factor", nullptr}, {"moe_pad_expert_input_to_capacity", false}, {"moe_grouped_gemm", true}};
  return settings;
}

/// Two microbatches per iteration, then the case's model settings.
inline nlohmann::json case_settings(const GraphCase& c) {
  nlohmann::json settings{{"global_batch_size", 16}};
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

/// The eager run of a case's model, checked bitwise reproducible (trained twice).
inline TrainRun eager_run(const GraphCase& c, int steps) {
  TrainRun first = train_on_gpu(preset_config(c.preset, case_settings(c)), steps);
  const TrainRun again = train_on_gpu(preset_config(c.preset, case_settings(c)), steps);
  EXPECT_TRUE(bitwise_equal(first, again)) << c.name << ": eager training is not bitwise reproducible on this GPU "
                                           << "(max loss difference " << max_difference(first, again) << ")";
  return first;
}

/// The case trained `steps` iterations with `impl` beside its eager run: captured, holding graphs, and
/// bitwise equal to eager (losses, evaluation, every parameter). Returns the graphed run.
inline TrainRun expect_graphed_run_equals_eager(const GraphCase& c, const std::string& impl, int steps) {
  const TrainRun eager = eager_run(c, steps);
  TrainRun graphed = train_on_gpu(preset_config(c.preset, graphed_settings(c, impl)), steps);
  EXPECT_TRUE(graphed.captured);
  EXPECT_GT(graphed.graphs, 0);
  EXPECT_TRUE(bitwise_equal(graphed, eager)) << c.name << ": " << impl << " graphs differ from eager; max loss "
                                             << "difference " << max_difference(graphed, eager) << ", evaluation "
                                             << graphed.evaluation << " vs " << eager.evaluation;
  return graphed;
}

/// Dropout 0.1 on tiny (attn + mlp graphed with `impl`), 20 steps: the graphed losses must equal
/// eager's bit for bit, and differ from a run without dropout.
inline void expect_dropout_follows_eager(const std::string& impl) {
  const nlohmann::json dropout{
      {"attention_dropout", 0.1}, {"hidden_dropout", 0.1}, {"micro_batch_size", 8}, {"global_batch_size", 16}};
  nlohmann::json graphed = dropout;
  graphed.update({{"cuda_graph_impl", impl}, {"cuda_graph_modules", {"attn", "mlp"}}});
  const TrainRun eager_run = train_on_gpu(preset_config("tiny", dropout), 20);
  const TrainRun graphed_run = train_on_gpu(preset_config("tiny", graphed), 20);
  const TrainRun no_dropout =
      train_on_gpu(preset_config("tiny", {{"micro_batch_size", 8}, {"global_batch_size", 16}}), 20);
  EXPECT_NE(eager_run.losses, no_dropout.losses) << "dropout must change the losses";
  EXPECT_EQ(graphed_run.losses, eager_run.losses) << impl << ": the graphs must consume the RNG exactly as eager does; "
                                                  << "max difference " << max_difference(graphed_run, eager_run);
}

/// The error text of a forward with batch 2 (instead of the captured 1) after `settings` captured on tiny.
inline std::string error_of_other_batch_after_capture(const nlohmann::json& settings) {
  const config::RunConfig config = preset_config("tiny", settings);
  train::Trainer trainer(config, train::TokenDataset::open(config.train, config.model, "", 0),
                         at::Device(at::kCUDA, 0));
  for (int it = 0; it < 3; ++it) trainer.train_step(it);
  EXPECT_TRUE(trainer.runner().capture_report().has_value());
  const at::Tensor tokens = at::zeros({2, 64}, at::TensorOptions().device(at::kCUDA).dtype(at::kLong));
  try {
    compat::AutocastScope autocast(true);
    trainer.model()->forward(tokens, tokens, 0);
  } catch (const CaptureError& error) {
    return error.what();
  }
  return "(no error)";
}

/// tiny with `impl`, 20 steps of 2 microbatches beside eager, the graphs deleted before iteration 10:
/// every loss equal to eager's, and graphs captured again at the end; then check_at_end(graphed trainer).
inline void expect_delete_then_capture_again_keeps_eager_losses(
    const std::string& impl, const std::function<void(const train::Trainer&)>& check_at_end = {}) {
  const config::RunConfig eager_config = preset_config("tiny", {{"global_batch_size", 16}});
  const config::RunConfig graphed_config =
      preset_config("tiny", {{"global_batch_size", 16}, {"cuda_graph_impl", impl}});
  train::Trainer eager(eager_config, train::TokenDataset::open(eager_config.train, eager_config.model, "", 0),
                       at::Device(at::kCUDA, 0));
  train::Trainer graphed(graphed_config, train::TokenDataset::open(graphed_config.train, graphed_config.model, "", 0),
                         at::Device(at::kCUDA, 0));
  for (int it = 0; it < 20; ++it) {
    if (it == 10) {
      EXPECT_GT(graphed.runner().graph_count(), 0);
      graphed.delete_cuda_graphs();
      EXPECT_EQ(graphed.runner().graph_count(), 0);
    }
    EXPECT_EQ(graphed.train_step(it).loss.item<double>(), eager.train_step(it).loss.item<double>())
        << "iteration " << it;
  }
  EXPECT_GT(graphed.runner().graph_count(), 0) << impl << ": captured again after the delete";
  if (check_at_end) check_at_end(graphed);
}

}  // namespace graphed::testing
