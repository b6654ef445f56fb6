// tests/run_config_for_test.h — builds a resolved RunConfig from a few JSON settings over the
// defaults, for tests that need a model or a trainer.
#pragma once

#include <nlohmann/json.hpp>

#include "graphed/config/run_config.h"

namespace graphed::testing {

inline config::RunConfig run_config(const nlohmann::json& overrides) {
  config::Settings settings;
  config::apply_settings(settings, overrides, "test");
  return config::resolve_run_config_or_throw(settings);
}

}  // namespace graphed::testing
