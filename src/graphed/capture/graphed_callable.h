// capture/graphed_callable.h — one unit captured ahead of time for one microbatch slot: a forward
// graph and (when an output needs grad) a backward graph over static buffers, replayed through
// autograd. A call copies each argument into its static buffer only when the address differs,
// replays the forward graph and returns detached static outputs (overwritten by the next replay:
// clone what you keep). Backward copies the incoming grads, replays the backward graph and hands input
// grads to autograd; parameter grads are accumulated inside the graph or handed to autograd, as clones
// unless clone_parameter_grads is off (returning graph memory would let AccumulateGrad adopt it as
// param.grad when none exists, PyTorch #181723). Built by
// make_graphed_callables (capture/make_graphed_callables.h). Model-agnostic.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graphed/capture/unit_runner.h"

namespace graphed::capture {

namespace detail {
struct GraphedUnitState;
}

/// A unit's arguments: positional tensors, then keyword tensors. The unit's function receives them
/// flattened: positional first, then keyword values in name order.
struct UnitArguments {
  std::vector<at::Tensor> positional;
  std::map<std::string, at::Tensor> keyword;
  std::vector<at::Tensor> flatten() const;
  /// Names of the flattened arguments: the unit's input names (or "argument i"), then keyword names.
  std::vector<std::string> names(const GraphableUnit& unit) const;
};

class GraphedCallable final : public UnitRunner {
 public:
  /// Wraps a state made by make_graphed_callables.
  explicit GraphedCallable(std::shared_ptr<detail::GraphedUnitState> state);
  ~GraphedCallable() override;

  /// Positional arguments only (UnitRunner; this callable is one slot, so the microbatch is not read).
  /// A unit captured with keyword arguments needs call().
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, int64_t microbatch) override;
  /// Checks the arguments against the capture, then replays (see the file comment).
  std::vector<at::Tensor> call(const UnitArguments& arguments);
  const GraphableUnit& unit() const override;
  /// Destroys both graphs. Later calls, and backward passes of earlier calls, throw.
  void reset();

  /// "layers.0.attention (microbatch 1)"
  std::string label() const;
  int64_t microbatch() const;
  bool is_captured() const;
  /// Whether an output needed grad, so that a backward graph was captured too.
  bool has_backward_graph() const;
  /// Graphs this callable holds: 2 with a backward graph, else 1 (0 after reset).
  int64_t graph_count() const;
  /// Parameters the graphs use (those nothing depends on are dropped at capture).
  int64_t parameter_count() const;
  /// The buffers a replay reads and writes (for address checks): static input i, static output i,
  /// the grad-output buffer of output i and the grad buffer of argument i (undefined where none).
  const at::Tensor& static_input(std::size_t index) const;
  const at::Tensor& static_output(std::size_t index) const;
  const at::Tensor& static_grad_output(std::size_t index) const;
  const at::Tensor& static_grad_input(std::size_t index) const;

 private:
  std::shared_ptr<detail::GraphedUnitState> state_;
};

/// Routes a unit to the graphed callable of the microbatch it runs: slot = microbatch modulo the
/// number of callables (Megatron's current_microbatch mod M). Without grad mode (evaluation,
/// generation) it runs the unit eagerly: like TransformerEngine's, these graphs serve training only.
class MicrobatchRunner final : public UnitRunner {
 public:
  MicrobatchRunner(GraphableUnit unit, std::vector<std::shared_ptr<GraphedCallable>> callables);
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, int64_t microbatch) override;
  const GraphableUnit& unit() const override { return unit_; }
  const std::vector<std::shared_ptr<GraphedCallable>>& callables() const { return callables_; }

 private:
  GraphableUnit unit_;
  std::vector<std::shared_ptr<GraphedCallable>> callables_;
};

}  // namespace graphed::capture
