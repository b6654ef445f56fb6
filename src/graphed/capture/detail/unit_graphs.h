// capture/detail/unit_graphs.h — the steps both capture engines take for one graphed unit
// (detail::GraphedUnitState): a warmup pass, the forward capture, the backward capture with parameter
// grads accumulated inside the graph, and the replay through autograd. The engines decide what the
// static buffers are and in which order units are captured (make_graphed_callables walks a pipeline
// order, the local registry its recorded iteration); these steps do the rest. Internal to capture/.
#pragma once

#include <memory>
#include <set>
#include <vector>

#include "graphed/capture/detail/graphed_unit_state.h"

namespace graphed::capture::detail {

/// Parameters (by TensorImpl) that more than one unit reads, such as tied embeddings. Their grads go
/// through autograd, which sums them before adding them to param.grad as eager autograd does; grads added
/// one by one inside two graphs would round differently.
std::set<const void*> shared_parameters(const std::vector<GraphableUnit>& units);

/// Whether `buffer` can be the grad-output buffer of `output`: defined, with its shape and dtype.
inline bool can_hold_grad_of(const at::Tensor& buffer, const at::Tensor& output) {
  return buffer.defined() && buffer.sizes().equals(output.sizes()) && buffer.scalar_type() == output.scalar_type();
}

/// The surface of a state: its static inputs, then its parameters.
std::vector<at::Tensor> surface_of(const GraphedUnitState& state);

/// One warmup pass in flight: the inputs it ran on and the outputs it returned.
struct WarmupPass {
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> outputs;
};

/// The forward half of a warmup pass: runs the unit eagerly on `inputs` (leaves with the recorded
/// requires-grad flags). On the first pass, notes whether the forward draws random numbers.
WarmupPass warm_up_forward(GraphedUnitState& state, std::vector<at::Tensor> inputs, bool first_pass,
                           const at::Device& device);
/// The backward half: grads of the outputs that need grad (seeded with ones) with respect to the inputs
/// and parameters that need grad, without touching param.grad. On the first pass, notes whether the
/// backward draws random numbers, drops parameters nothing depends on and marks unused arguments as
/// needing no grad (a CaptureError naming the argument unless allow_unused_input).
void warm_up_backward(GraphedUnitState& state, WarmupPass pass, bool first_pass, bool allow_unused_input,
                      const at::Device& device);

/// Captures the forward graph over the static inputs into the pool. The static outputs keep their
/// autograd graph until capture_backward (or release_autograd_graph) has run.
void capture_forward(GraphedUnitState& state, const GraphPool& pool, CaptureMode mode);
/// Captures the backward graph. seeds: one per output, defined exactly where the output needs grad;
/// they become the static grad outputs. Grads of parameters marked accumulate_in_graph are added to
/// param.grad inside the graph (which must exist); the others become static grad inputs.
void capture_backward(GraphedUnitState& state, const std::vector<at::Tensor>& seeds, const GraphPool& pool,
                      CaptureMode mode, bool retain_graph);
/// Drops the autograd graph the forward capture left on the static outputs. non_owning: the outputs
/// become aliases that do not own their memory, which goes back to the pool for later captures (valid
/// only while graphs replay in capture order).
void release_autograd_graph(GraphedUnitState& state, bool non_owning);
/// After the captures: remembers parameter and grad addresses, decides which tensors a call hands to
/// autograd, and marks the state captured.
void finish_capture(GraphedUnitState& state);

/// A call: checks the arguments against the capture, copies them into the static inputs where needed,
/// replays the forward graph and returns its outputs, with a backward node that replays the backward
/// graph when grads flow. Throws CaptureError for a mismatched call or deleted graphs.
std::vector<at::Tensor> replay(const std::shared_ptr<GraphedUnitState>& state,
                               const std::vector<at::Tensor>& arguments);

/// A tensor aliasing another's memory without owning it (TransformerEngine's make_weak_ref).
at::Tensor non_owning_alias(const at::Tensor& tensor);
/// Destroys both graphs and every buffer; later calls and pending backward passes throw.
void reset(GraphedUnitState& state);

}  // namespace graphed::capture::detail
