// capture/cuda_graph_manager.h — the local implementation's per-unit manager (research
// megatron-cudagraphs.md §2.3–2.4, §2.11; Megatron's CudaGraphManager): the UnitRunner a model
// calls for one graphable unit. It owns the unit's runners and routes each call by the registry's
// phase: eagerly while warming up; through a runner that records while recording; to a captured
// runner afterwards. Runners are reused in creation order (pipeline size 1): the first one that has
// no backward pending and matches the call's arguments; while recording, a call that none matches
// gets a new runner, after creation it is an error naming the argument and both signatures. Calls
// without grad replay forward-only graphs inside a GraphRegistry::EvaluationScope and run eagerly
// elsewhere. Model-agnostic.
#pragma once

#include <memory>
#include <vector>

#include "graphed/capture/cuda_graph_runner.h"
#include "graphed/capture/unit_runner.h"

namespace graphed::capture {

class GraphRegistry;

class CudaGraphManager final : public UnitRunner {
 public:
  /// registry: not owned; registers this manager until either is destroyed.
  CudaGraphManager(GraphableUnit unit, GraphRegistry& registry);
  ~CudaGraphManager() override;
  CudaGraphManager(const CudaGraphManager&) = delete;
  CudaGraphManager& operator=(const CudaGraphManager&) = delete;

  /// See the file comment. The microbatch is not read: with one pipeline stage, runners are reused
  /// for every microbatch, by readiness.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, int64_t microbatch) override;
  const GraphableUnit& unit() const override { return unit_; }

  int64_t training_runner_count() const { return static_cast<int64_t>(training_runners_.size()); }
  int64_t forward_only_runner_count() const { return static_cast<int64_t>(forward_only_runners_.size()); }
  int64_t graph_count() const;
  const CudaGraphRunner& training_runner(std::size_t index) const { return *training_runners_.at(index); }
  const CudaGraphRunner& forward_only_runner(std::size_t index) const { return *forward_only_runners_.at(index); }

  /// The registry drops every runner (delete_cuda_graphs, a failed creation).
  void forget_runners();
  /// The registry is going away: from now on the unit runs eagerly.
  void detach_registry() { registry_ = nullptr; }

 private:
  CudaGraphRunner& select_training_runner(const std::vector<at::Tensor>& inputs, bool may_create);
  std::vector<at::Tensor> run_without_grad(const std::vector<at::Tensor>& inputs);
  [[noreturn]] void throw_no_match(const std::vector<at::Tensor>& inputs) const;

  GraphableUnit unit_;
  GraphRegistry* registry_;  ///< not owned; null once the registry is gone
  std::vector<std::unique_ptr<CudaGraphRunner>> training_runners_;
  std::size_t next_runner_ = 0;  ///< per-microbatch mode: the runner of the next call, modulo the count
  std::vector<std::unique_ptr<CudaGraphRunner>> forward_only_runners_;
};

}  // namespace graphed::capture
