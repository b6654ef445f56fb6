// model/paged_experts.h — the grouped experts' ffn over fixed expert blocks with Megatron's paged stash
// (--moe-paged-stash): of a block's R rows only the first n are real (n on the device), and the rows the backward
// needs (the experts' input, fc1's output and the activation's output) wait in a paged stash (kernels/paged_stash.h)
// holding those n rather than in R-row tensors. Its own autograd node runs the forward and backward products
// (kernels/grouped_gemm_ops.h, kernels/moe_routing_ops.h) over the rows it takes back; rows past n come back zero,
// and their gradients are zero either way (nothing downstream reads their outputs).
#pragma once

#include <ATen/ATen.h>

#include "graphed/kernels/moe_expert_rows.h"
#include "graphed/kernels/paged_stash.h"

namespace graphed::model {

/// The experts' weights as the products read them (the run's working copies under autocast).
struct GroupedMlpWeights {
  at::Tensor fc1;       ///< [E, h, f1]
  at::Tensor fc1_bias;  ///< fp32 [E, f1], or undefined
  at::Tensor fc2;       ///< [E, f, h]
  at::Tensor fc2_bias;  ///< fp32 [E, h], or undefined (also off the first tensor rank)
  kernels::ExpertActivation activation = kernels::ExpertActivation::kGelu;
  at::ScalarType type = at::kFloat;  ///< the products' type
};

/// One pass of the grouped experts' ffn: fc1's output, the activation's output and the output.
struct GroupedMlpPass {
  at::Tensor hidden;     ///< fc1's output [R, f1]
  at::Tensor activated;  ///< activation(hidden + fc1's bias) [R, f]
  at::Tensor output;     ///< fc2's output plus its bias [R, h]
};

/// rows [R, h] (the products' type, sorted by expert with `offsets` [E + 1]) through every expert's ffn: fc1, each
/// expert's bias with the activation, fc2 and its bias (kernels/grouped_gemm_ops.h, kernels/moe_routing_ops.h),
/// differentiable through those ops. What MoeImpl::grouped_experts runs, and paged_grouped_mlp without autograd.
GroupedMlpPass grouped_mlp(const at::Tensor& rows, const GroupedMlpWeights& weights, const at::Tensor& offsets);

/// rows [R, h] (the products' type, contiguous, sorted by expert with `offsets` [E + 1], the real rows first) through
/// every expert's ffn -> [R, h]. `real_rows`: int64 scalar on the device; `balanced_rows`: the real rows on a
/// balanced load (the stash's size). Without a gradient to compute nothing is parked.
at::Tensor paged_grouped_mlp(const at::Tensor& rows, const GroupedMlpWeights& weights, const at::Tensor& offsets,
                             const at::Tensor& real_rows, int64_t balanced_rows, kernels::PagedStash& stash);

}  // namespace graphed::model
