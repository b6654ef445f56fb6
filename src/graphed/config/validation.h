// config/validation.h — the rules a resolved configuration must satisfy: Megatron's
// TransformerConfig/validate_args/Bridge rules that apply to graphed (TC-*, VA-*, research
// §1.7/§1.9/§1.10) and graphed's own (G*, MC-*, TR-*). Every rule is listed with its id and message
// in docs/configuration.md; tests/config/validation_test.cpp fires and clears each one.
#pragma once

#include <string>
#include <vector>

#include "graphed/config/config_issue.h"

namespace graphed::config {

struct RunConfig;

/// Appends every violated rule to issues. Reads the config; changes nothing.
void validate_run_config(const RunConfig& config, IssueList& issues);

/// Only the tensor-parallel rules (PL-7 to PL-11) for config.train.tensor_model_parallel_size: for a model
/// loaded whole and split afterwards (a tensor-parallel server).
void validate_tensor_parallel_model(const RunConfig& config, IssueList& issues);

/// A rule's id and a one-line summary, for docs and tests.
struct RuleInfo {
  std::string id;
  std::string summary;
};

/// Every rule id graphed can report (migration, normalization and validation), in docs order.
const std::vector<RuleInfo>& all_rules();

}  // namespace graphed::config
