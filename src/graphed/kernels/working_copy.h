// kernels/working_copy.h — a parameter's working copy (the bf16 weights the optimizer writes beside the fp32
// masters) as a differentiable stand-in for the master: products that read the copy need no cast at every use, and
// the copy's gradient goes to the master, added into its .grad in place where the caller accumulates so (one kernel,
// the accumulation listeners told: kernels/accumulation_listeners.h).
#pragma once

#include <ATen/ATen.h>

namespace graphed::kernels {

/// `copy` (master's working copy: the same shape, another type) as a tensor whose gradient reaches `master`: added
/// into master.grad in place when `accumulate` and that .grad is fp32, contiguous and of master's shape; else handed
/// to autograd in master's type.
at::Tensor working_copy(const at::Tensor& master, const at::Tensor& copy, bool accumulate);

}  // namespace graphed::kernels
