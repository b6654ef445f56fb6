// capture/cuda_graph_manager.cpp — see capture/cuda_graph_manager.h.
#include "graphed/capture/cuda_graph_manager.h"

#include <ATen/core/grad_mode.h>

#include "graphed/capture/capture_state.h"
#include "graphed/capture/graph_registry.h"
#include "graphed/util/error.h"

namespace graphed::capture {

CudaGraphManager::CudaGraphManager(GraphableUnit unit, GraphRegistry& registry)
    : unit_(std::move(unit)), registry_(&registry) {
  GRAPHED_INTERNAL_ASSERT(static_cast<bool>(unit_.forward), "unit ", unit_.name, " has no function");
  registry_->add_manager(this);
}

CudaGraphManager::~CudaGraphManager() {
  if (registry_ != nullptr) registry_->remove_manager(this);
}

int64_t CudaGraphManager::graph_count() const {
  int64_t graphs = 0;
  for (const auto& runner : training_runners_) graphs += runner->graph_count();
  for (const auto& runner : forward_only_runners_) graphs += runner->graph_count();
  return graphs;
}

void CudaGraphManager::forget_runners() {
  training_runners_.clear();
  next_runner_ = 0;
  forward_only_runners_.clear();
}

std::vector<at::Tensor> CudaGraphManager::run(const std::vector<at::Tensor>& inputs, int64_t /*microbatch*/) {
  // Inside another graph's capture or warmup (a full-iteration graph around the model, an engine's
  // warmup pass) the unit is part of that work: it runs as it is, recording and replaying nothing. So
  // it does inside an EagerScope.
  if (registry_ == nullptr || is_graph_capturing() || is_graph_warmup() || is_eager_only()) {
    return unit_.forward(inputs);
  }
  if (!at::GradMode::is_enabled()) return run_without_grad(inputs);
  switch (registry_->phase()) {
    case LocalPhase::kEager: return unit_.forward(inputs);
    case LocalPhase::kRecording: return select_training_runner(inputs, /*may_create=*/true).record(inputs, *registry_);
    case LocalPhase::kCreated: return select_training_runner(inputs, /*may_create=*/false).replay(inputs);
  }
  return unit_.forward(inputs);
}

CudaGraphRunner& CudaGraphManager::select_training_runner(const std::vector<at::Tensor>& inputs, bool may_create) {
  if (registry_->options().per_microbatch_runners && !may_create && !training_runners_.empty()) {
    CudaGraphRunner& runner = *training_runners_[next_runner_++ % training_runners_.size()];
    if (!runner.is_ready_for_forward() || !runner.mismatches(inputs).empty()) throw_no_match(inputs);
    return runner;
  }
  if (registry_->options().per_microbatch_runners && may_create) {
    training_runners_.push_back(std::make_unique<CudaGraphRunner>(unit_, CudaGraphRunner::Kind::kTraining,
                                                                  registry_->next_runner_id(), inputs));
    return *training_runners_.back();
  }
  for (const auto& runner : training_runners_) {
    if (runner->is_ready_for_forward() && runner->mismatches(inputs).empty()) return *runner;
  }
  if (!may_create) throw_no_match(inputs);
  training_runners_.push_back(
      std::make_unique<CudaGraphRunner>(unit_, CudaGraphRunner::Kind::kTraining, registry_->next_runner_id(), inputs));
  return *training_runners_.back();
}

std::vector<at::Tensor> CudaGraphManager::run_without_grad(const std::vector<at::Tensor>& inputs) {
  if (registry_->phase() != LocalPhase::kCreated || !registry_->evaluation_graphs_enabled())
    return unit_.forward(inputs);
  for (const auto& runner : forward_only_runners_) {
    if (runner->mismatches(inputs).empty()) return runner->replay(inputs);
  }
  forward_only_runners_.push_back(std::make_unique<CudaGraphRunner>(unit_, CudaGraphRunner::Kind::kForwardOnly,
                                                                    registry_->next_runner_id(), inputs));
  return forward_only_runners_.back()->capture_inline(inputs, *registry_);
}

void CudaGraphManager::throw_no_match(const std::vector<at::Tensor>& inputs) const {
  std::string details;
  for (const auto& runner : training_runners_) {
    const std::vector<std::string> differences = runner->mismatches(inputs);
    if (differences.empty()) {
      details +=
          "\n  - " + runner->label() + ": the arguments match, but the backward of its previous call has not run";
    }
    for (const std::string& difference : differences) details += "\n  - " + runner->label() + ": " + difference;
  }
  throw CaptureError("unit " + unit_.name + ": no captured graph matches this call (" +
                         std::to_string(training_runners_.size()) + " recorded for this unit):" + details,
                     "call each graphed unit with the arguments of the recorded iteration, running the backward of "
                     "one call before the next forward of the same unit, or delete the graphs (delete_cuda_graphs) "
                     "so that the next iteration records the new shapes");
}

}  // namespace graphed::capture
