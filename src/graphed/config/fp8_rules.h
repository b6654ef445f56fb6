// config/fp8_rules.h — the rules of FP8 training (Megatron's --fp8-format and its settings; model/fp8_path.h):
// what it needs (bf16 with the fused kernels, no Mamba layers), the recipe's settings, and the sizes Hopper's
// FP8 GEMMs take (multiples of 16). The device itself is checked where training starts (a GPU of compute
// capability 8.9 or more).
#pragma once

#include "graphed/config/config_issue.h"

namespace graphed::config {

struct RunConfig;

/// FP-1 … FP-5; nothing without --fp8-format.
void validate_fp8(const RunConfig& config, IssueList& issues);

}  // namespace graphed::config
