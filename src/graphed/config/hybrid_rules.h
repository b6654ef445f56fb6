// config/hybrid_rules.h — the Mamba-hybrid settings in resolution (docs/hybrid.md): which kind each
// layer is (the pattern, filled from the ratios when none is given), the MoE layers that implies, and
// the rules on them (HY-1 … HY-6). validation.cpp's G4 covers --cuda-graph-modules mamba.
#pragma once

#include "graphed/config/config_issue.h"

namespace graphed::config {

struct RunConfig;

/// Before validation. A pattern or a ratio without --is-hybrid-model turns it on (note HY-1). A hybrid
/// model gets its pattern from allocate_hybrid_layers (HY-2 when it refuses) and one MoE flag per E
/// layer in moe_layers. Changes nothing for other models.
void resolve_hybrid_layers(RunConfig& config, IssueList& issues);

/// HY-3 (E layers need --num-experts; experts without E layers are unused), HY-4 (the Mamba shape),
/// HY-5 (--moe-layer-freq has no effect on a hybrid model), HY-6 (Mamba settings without Mamba layers).
void validate_hybrid(const RunConfig& config, IssueList& issues);

}  // namespace graphed::config
