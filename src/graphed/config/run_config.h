// config/run_config.h — the one configuration every component is built from: settings after
// cuda-graph migration, derivation of unset values (ffn = 4 x hidden, ...) and validation.
// resolve_run_config() is the only place that turns Settings into a RunConfig.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "graphed/config/config_issue.h"
#include "graphed/config/cuda_graph_config.h"
#include "graphed/config/settings.h"

namespace graphed::config {

struct RunConfig {
  ModelConfig model;             ///< every optional that has a derived default is filled
  TrainConfig train;             ///< global_batch_size and lr_decay_iters filled
  CudaGraphConfig cuda_graph;    ///< migrated and normalized
  std::vector<bool> moe_layers;  ///< one flag per layer: true = MoE layer (all false when dense)

  /// Microbatches per iteration and rank: global / (micro x data-parallel).
  int64_t num_microbatches() const;
};

struct Resolution {
  RunConfig config;
  IssueList issues;  ///< migrations, notes, warnings and errors, in the order found
};

/// Migrates, derives and validates. Does not throw for a bad configuration: errors are issues.
Resolution resolve_run_config(const Settings& settings);

/// Like resolve_run_config(), but throws ConfigError carrying every error when there is one.
/// The notes and warnings are copied to *issues when given.
RunConfig resolve_run_config_or_throw(const Settings& settings, IssueList* issues = nullptr);

/// The resolved configuration as JSON: model and train settings by key, the normalized cuda-graph
/// fields, and the derived values (num_microbatches, moe_layers).
nlohmann::json run_config_to_json(const RunConfig& config);

}  // namespace graphed::config
