// capture/detail/graphed_unit_state.h — what one graphed unit owns for one microbatch slot and one
// argument signature: static buffers, the forward and backward graphs, and how its grads reach
// autograd. Internal to capture/: the two engines (make_graphed_callables, ahead of time, and the
// recorded CudaGraphRunner) fill it through detail/unit_graphs.h and wrap it (GraphedCallable,
// CudaGraphRunner); no other layer includes this header.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "graphed/capture/argument_signature.h"
#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/unit_runner.h"

namespace graphed::capture::detail {

/// How a call's argument reaches its static buffer.
enum class InputBinding {
  kCopyWhenDifferent,  ///< copied in unless the caller passes the buffer itself
  kMustBeBuffer,       ///< the buffer is another graph's output: the caller must pass exactly it
};

struct GraphedUnitState {
  GraphableUnit unit;
  int64_t microbatch = 0;
  /// Which copy of the unit this is, for messages: "microbatch 1" (graphed callables), "runner 3" (local).
  std::string slot = "microbatch 0";
  std::vector<std::string> keyword_names;     ///< sorted; the trailing keyword arguments
  std::vector<ArgumentSignature> signatures;  ///< of the flattened arguments
  std::vector<at::Tensor> static_inputs;      ///< one buffer per flattened argument
  std::vector<InputBinding> input_bindings;   ///< per argument; empty = all kCopyWhenDifferent
  /// Producer of each kMustBeBuffer argument, for the error message ("layers.0.layer output 0").
  std::vector<std::string> input_producers;
  std::vector<at::Tensor> parameters;  ///< parameters the unit uses (unused ones dropped)
  std::vector<std::string> parameter_names;
  /// Per parameter: its grad is added to param.grad inside the backward graph (else autograd gets it).
  std::vector<bool> accumulate_in_graph;
  std::vector<const void*> parameter_addresses;       ///< at capture: parameters must not move
  std::vector<const void*> parameter_grad_addresses;  ///< at capture, where accumulated in the graph
  std::vector<bool> needs_grad;                       ///< per surface entry (arguments, then parameters)
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
  /// Parameter grads handed to autograd are clones (PyTorch #181723), unless turned off.
  bool clone_parameter_grads = true;
  /// Whether parameters are autograd inputs of a call: when some grad goes to autograd, or no argument
  /// needs grad (then only they make autograd run the backward).
  bool parameters_in_surface = true;
  /// Forward replays (or recorded calls) whose backward has not run yet; a graph with a pending
  /// backward must not be replayed forward again (its buffers still serve that backward).
  int64_t pending_backwards = 0;
  bool captured = false;

  /// "layers.0.attention (microbatch 1)", "layers.0.layer (runner 3)"
  std::string label() const;
  /// 2 with a backward graph, 1 without, 0 before the capture.
  int64_t graph_count() const { return captured ? (has_backward ? 2 : 1) : 0; }
};

}  // namespace graphed::capture::detail
