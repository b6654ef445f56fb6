// config/parallel_rules.h — the rules of a parallel layout (docs/distributed.md): the launch's world size
// against tensor x pipeline (PL-2), the pipeline's layer split (PL-3 … PL-6), what tensor parallelism splits
// and its notes (PL-7, PL-9 … PL-12), expert parallelism (PL-13 … PL-18, PL-20).
#pragma once

#include "graphed/config/config_issue.h"

namespace graphed::config {

struct RunConfig;

/// PL-2 … PL-20, for sizes PL-1 found positive (a size below 1 is left to it).
void validate_parallel_layout(const RunConfig& config, IssueList& issues);

}  // namespace graphed::config
