// train/pipeline_checkpoint.h — which pipeline stage trains each parameter, and the whole training state
// gathered onto the pipeline's first rank for a checkpoint: each stage broadcasts its parameters and
// their AdamW state over the pipeline group, so the checkpoint is the one a single process would write
// and loads under any layout.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "graphed/dist/process_groups.h"
#include "graphed/model/gpt_model.h"
#include "graphed/train/adamw.h"

namespace graphed::train {

/// Whether the rank of `layout` trains the named parameter: every one with one stage; under pipeline
/// parallelism the layers of its chunks, the embeddings on the first stage, and the final norm and output
/// layer (the word embedding when tied) on the last.
bool stage_trains_parameter(const std::string& name, const dist::ParallelLayout& layout, bool tied_output);

struct GatheredState {
  std::vector<std::pair<std::string, at::Tensor>> parameters;       ///< the model's, in its order
  std::vector<std::pair<std::string, at::Tensor>> optimizer_state;  ///< AdamW::state() names, "lr" last
};

/// Collective over the pipeline group of data-parallel rank 0, under expert parallelism of each of the first
/// expert group's data ranks (its every rank calls it; the other data-parallel ranks return at once). Returns the
/// state of every stage (this expert rank's share of the experts) on pipeline rank 0, nothing elsewhere.
/// parameters: the model's by name, whole where this stage trains them (the distributed optimizer's gathered);
/// optimizer_state: this stage's, by AdamW::state()'s names, the moments whole.
GatheredState gather_pipeline_state(const std::vector<std::pair<std::string, at::Tensor>>& parameters,
                                    const std::vector<std::pair<std::string, at::Tensor>>& optimizer_state,
                                    dist::ProcessGroups& groups, bool tied_output);

}  // namespace graphed::train
