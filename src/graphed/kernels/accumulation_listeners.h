// kernels/accumulation_listeners.h — who hears that a fused kernel has added a parameter's gradient into
// its .grad in place. Autograd's AccumulateGrad then gets no gradient, so whatever watches gradients arrive
// (the data-parallel reducer, which launches a bucket once its gradients are in) listens here too.
#pragma once

#include <cstdint>
#include <functional>

#include <ATen/ATen.h>

namespace graphed::kernels {

/// Called with the parameter whose .grad was just added to (the work enqueued on the current stream).
using AccumulationListener = std::function<void(const at::Tensor& parameter)>;

/// Adds a listener; remove_accumulation_listener(the returned id) takes it away again.
int64_t add_accumulation_listener(AccumulationListener listener);
void remove_accumulation_listener(int64_t id);

/// Tells every listener that `parameter`'s gradient was accumulated in place (the fused kernels call it while
/// they enqueue the work: eagerly, or while a graph is captured; a graph's replay tells no one).
void gradient_accumulated(const at::Tensor& parameter);

}  // namespace graphed::kernels
