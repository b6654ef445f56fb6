// capture/graphed_callable.h — one unit captured ahead of time for one microbatch slot: a forward
// graph and (when an output needs grad) a backward graph over static buffers, replayed through a
// torch::autograd::Function. A call copies each argument into its static buffer only when the
// address differs, replays the forward graph and returns detached static outputs (overwritten by the
// next replay: clone what you keep). Backward copies the incoming grads, replays the backward graph
// and hands input and parameter grads to autograd; parameter grads are cloned by default, because
// returning graph memory lets AccumulateGrad adopt it as param.grad (PyTorch #181723). Built by
// make_graphed_callables (capture/make_graphed_callables.h). Model-agnostic.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graphed/capture/argument_signature.h"
#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/unit_runner.h"

namespace graphed::capture {

/// A unit's arguments: positional tensors, then keyword tensors. The unit's function receives them
/// flattened: positional first, then keyword values in name order.
struct UnitArguments {
  std::vector<at::Tensor> positional;
  std::map<std::string, at::Tensor> keyword;
  std::vector<at::Tensor> flatten() const;
  /// Names of the flattened arguments: the unit's input names (or "argument i"), then keyword names.
  std::vector<std::string> names(const GraphableUnit& unit) const;
};

/// Everything one (unit, microbatch) graph pair owns. Shared with the autograd nodes of its replays,
/// so a node outliving reset() fails with a clear error instead of touching freed graphs.
struct GraphedUnitState {
  GraphableUnit unit;
  int64_t microbatch = 0;
  std::vector<std::string> keyword_names;      ///< sorted; the trailing keyword arguments
  std::vector<ArgumentSignature> signatures;   ///< of the flattened arguments
  std::vector<at::Tensor> static_inputs;       ///< flattened arguments' buffers
  std::vector<at::Tensor> parameters;          ///< parameters the unit uses (unused ones dropped)
  std::vector<std::string> parameter_names;
  std::vector<const void*> parameter_addresses;  ///< at capture: parameters must not move
  std::vector<bool> needs_grad;                ///< per surface entry (arguments, then parameters)
  CudaGraph forward_graph;
  CudaGraph backward_graph;
  /// Whether the warmup saw the forward / backward draw random numbers; graphs that draw none are
  /// launched without the generator update (CudaGraph::launch_without_random_state).
  bool forward_draws_random = true;
  bool backward_draws_random = true;
  bool has_backward = false;
  std::vector<at::Tensor> static_outputs;
  std::vector<bool> output_requires_grad;
  std::vector<at::Tensor> static_grad_outputs;  ///< undefined where the output needs no grad
  std::vector<at::Tensor> static_grad_inputs;   ///< per surface entry; undefined where none
  bool clone_parameter_grads = true;
  /// Parameter grads accumulate inside the backward graph into these (accumulate_parameter_grads).
  bool parameter_grads_in_graph = false;
  /// Whether parameters are autograd inputs of a call. Not when their grads accumulate in the graph
  /// and an argument needs grad (which alone makes autograd run the backward): autograd then never
  /// visits their accumulate-grad nodes.
  bool parameters_in_surface = true;
  std::vector<const void*> parameter_grad_addresses;
  bool captured = false;

  /// "layers.0.attention (microbatch 1)"
  std::string label() const;
};

class GraphedCallable final : public UnitRunner {
 public:
  explicit GraphedCallable(std::shared_ptr<GraphedUnitState> state) : state_(std::move(state)) {}

  /// Positional arguments only (UnitRunner); a unit captured with keyword arguments needs call().
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override;
  /// Checks the arguments against the capture, then replays (see the file comment).
  std::vector<at::Tensor> call(const UnitArguments& arguments);
  const GraphableUnit& unit() const override { return state_->unit; }
  int64_t microbatch() const { return state_->microbatch; }
  /// Destroys both graphs. Later calls, and backward passes of earlier calls, throw.
  void reset();
  bool is_captured() const { return state_->captured; }
  const GraphedUnitState& state() const { return *state_; }

 private:
  std::vector<at::Tensor> replay(const std::vector<at::Tensor>& flat_arguments);
  std::shared_ptr<GraphedUnitState> state_;
};

/// Routes a unit to the graphed callable of the current microbatch slot: slot = *microbatch modulo the
/// number of callables (Megatron's current_microbatch). Without grad mode (evaluation, generation) it
/// runs the unit eagerly: like TransformerEngine's, these graphs serve training only.
class MicrobatchRunner final : public UnitRunner {
 public:
  MicrobatchRunner(GraphableUnit unit, std::vector<std::shared_ptr<GraphedCallable>> callables,
                   std::shared_ptr<const int64_t> microbatch);
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override;
  const GraphableUnit& unit() const override { return unit_; }
  const std::vector<std::shared_ptr<GraphedCallable>>& callables() const { return callables_; }

 private:
  GraphableUnit unit_;
  std::vector<std::shared_ptr<GraphedCallable>> callables_;
  std::shared_ptr<const int64_t> microbatch_;
};

}  // namespace graphed::capture
