// capture/make_graphed_callables.h — PyTorch's torch.cuda.make_graphed_callables with
// TransformerEngine's extensions, for LibTorch (research/libtorch-graphs.md §1.2 and §2): ahead-of-time
// forward and backward graphs per (unit, microbatch), keyword arguments, a pipeline `order` that
// warmup and capture walk, schedule-aware reuse of static buffers, one shared pool, parameter grads
// cloned on return. Model-agnostic: a unit is any function over tensors plus its parameters.
#pragma once

#include <memory>
#include <vector>

#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/graphed_callable.h"

namespace graphed::capture {

struct GraphedCallablesOptions {
  /// Eager forward+backward passes over every (unit, microbatch) before capture (cuBLAS/cuDNN
  /// autotuning, lazy initialization). >= 1.
  int64_t warmup_iterations = 3;
  /// An argument that needs grad but influences no output is an error unless this is set (its grad
  /// is then undefined). Parameters that influence nothing are always dropped (TransformerEngine).
  bool allow_unused_input = false;
  /// The pool every graph shares; default: one new pool for this call.
  GraphPool pool;
  CaptureMode mode = CaptureMode::kGlobal;
  /// TransformerEngine's `_order`: +c / -c = forward / backward of the next microbatch of 1-based chunk
  /// c. Empty: one chunk holding every unit, one microbatch ([1, -1]): all forwards, then all
  /// backwards in reverse, as PyTorch's make_graphed_callables.
  std::vector<int64_t> order;
  /// Units per chunk (with order); empty: an even split.
  std::vector<int64_t> layers_per_chunk;
  /// Entries whose lifetimes (forward to end of backward, in `order`) do not overlap share static
  /// input buffers (capture/sample_buffer_plan.h), grad-output buffers of equal shape are shared, and
  /// a microbatch's static outputs return to the pool after its backward: they are then valid only
  /// until that backward has run (TransformerEngine's _reuse_graph_input_output_buffers).
  bool reuse_buffers = false;
  /// Hand autograd clones of the parameter grads (default; see graphed_callable.h). Turn off only
  /// when every param.grad is allocated before the first backward, so accumulation is in place.
  bool clone_parameter_grads = true;
  /// Accumulate parameter grads inside the backward graph, into each param.grad, which must exist at
  /// capture and keep its address (zero it in place; never set it to none). Saves the clone and the
  /// eager accumulation per parameter and call; TransformerEngine captures accumulation likewise.
  /// A parameter several units share (tied embeddings) still goes through autograd, which sums its
  /// grads before adding them, as eager does. Input grads always go to autograd.
  bool accumulate_parameter_grads = false;
  /// Per unit (empty: none): argument 0 of unit u is, in every call, output 0 of unit u - 1 of the same
  /// chunk and microbatch. Its static buffer is then that output, so the call copies nothing, and unit
  /// u - 1's incoming-grad buffer is unit u's input-grad buffer. The caller promises the dataflow: an
  /// argument 0 from elsewhere is copied over the previous unit's output.
  std::vector<bool> chained_inputs;
  /// Keep the captured backward's autograd graph until the capture ends (retain_graph).
  bool retain_backward_graph = false;
};

/// units: N units; sample_arguments: one per (unit, microbatch), indexed chunk-major, then
/// microbatch, then unit within the chunk: prefix_units[c] x M + microbatch x units[c] + unit (without
/// an order: one per unit). Sample tensors must be CUDA tensors with the shapes, dtypes and
/// requires-grad flags of the real calls; their values feed the warmup. Runs warmup and capture on the
/// current stream (a private side stream when that is the default stream), restores the CUDA and CPU
/// random states afterwards, and returns one callable per (unit, microbatch) in the same indexing.
/// Throws CaptureError naming the unit and argument for bad samples or a failed capture.
std::vector<std::shared_ptr<GraphedCallable>> make_graphed_callables(const std::vector<GraphableUnit>& units,
                                                                     const std::vector<UnitArguments>& sample_arguments,
                                                                     const GraphedCallablesOptions& options);

/// The checked layout of a call: chunks, microbatches and units per chunk from an order (the empty
/// order is [1, -1]). Throws CaptureError explaining a malformed order.
struct GraphedCallablesLayout {
  std::vector<int64_t> order;
  std::vector<int64_t> layers_per_chunk;
  std::vector<int64_t> prefix;  ///< units before chunk c (size chunks + 1)
  int64_t microbatches = 1;
  /// Index of (chunk, microbatch, unit within the chunk) in sample_arguments.
  int64_t entry(int64_t chunk, int64_t microbatch, int64_t layer) const;
};
GraphedCallablesLayout graphed_callables_layout(int64_t units, const std::vector<int64_t>& order,
                                                const std::vector<int64_t>& layers_per_chunk);

}  // namespace graphed::capture
