// train/pipeline_checkpoint.cpp — see train/pipeline_checkpoint.h.
#include "graphed/train/pipeline_checkpoint.h"

#include <map>

#include <ATen/core/grad_mode.h>

#include "graphed/util/error.h"

namespace graphed::train {

bool stage_trains_parameter(const std::string& name, const dist::ParallelLayout& layout, bool tied_output) {
  if (!layout.is_pipelined()) return true;
  if (name == "word_embeddings") return layout.holds_embedding() || (tied_output && layout.holds_loss());
  if (name == "position_embeddings") return layout.holds_embedding();
  if (name == "output_weight" || name.rfind("final_norm.", 0) == 0) return layout.holds_loss();
  if (name.rfind("layers.", 0) == 0) {
    const int64_t layer = std::stoll(name.substr(7, name.find('.', 7) - 7));
    for (int64_t c = 0; c < layout.chunks; ++c) {
      const dist::ModelChunk chunk = layout.chunk(c);
      if (layer >= chunk.first_layer && layer < chunk.end_layer()) return true;
    }
    return false;
  }
  return true;
}

namespace {

/// The first pipeline rank that trains the parameter (the first stage for a tied embedding).
int64_t owner_of(const std::string& name, const dist::ParallelLayout& layout, bool tied_output) {
  for (int64_t stage = 0; stage < layout.pipeline_size; ++stage) {
    dist::ParallelLayout other = layout;
    other.rank = layout.rank_at(stage, layout.data_rank(), layout.tensor_rank());
    if (stage_trains_parameter(name, other, tied_output)) return stage;
  }
  GRAPHED_INTERNAL_ASSERT(false, "no pipeline stage trains ", name);
  return 0;
}

}  // namespace

GatheredState gather_pipeline_state(const std::vector<std::pair<std::string, at::Tensor>>& parameters,
                                    const std::vector<std::pair<std::string, at::Tensor>>& optimizer_state,
                                    dist::ProcessGroups& groups, bool tied_output) {
  const dist::ParallelLayout& layout = groups.layout();
  GatheredState gathered;
  if (!layout.joins_checkpoint()) return gathered;  // data rank 0's (and each expert rank's under expert parallelism)
  at::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> own_state;
  for (const auto& [name, tensor] : optimizer_state) own_state.emplace(name, tensor);
  const bool keep = layout.pipeline_rank() == 0;
  // Every rank walks the same names in the same order: one broadcast per tensor, from its owner.
  const auto share = [&](at::Tensor buffer, int64_t owner, const std::string& name, bool parameter) {
    groups.pipeline().broadcast(buffer, owner);
    if (keep) (parameter ? gathered.parameters : gathered.optimizer_state).emplace_back(name, buffer);
  };
  for (const auto& [name, parameter] : parameters) {
    const int64_t owner = owner_of(name, layout, tied_output);
    share(parameter.detach().clone(), owner, name, true);
    for (const char* part : {".exp_avg", ".exp_avg_sq", ".step"}) {
      const auto found = own_state.find(name + part);
      at::Tensor buffer = found != own_state.end()       ? found->second.clone()
                          : std::string(part) == ".step" ? at::zeros({}, parameter.options().dtype(at::kFloat))
                                                         : at::zeros_like(parameter);
      share(buffer, owner, name + part, false);
    }
  }
  if (keep) gathered.optimizer_state.emplace_back("lr", own_state.at("lr"));
  return gathered;
}

}  // namespace graphed::train
