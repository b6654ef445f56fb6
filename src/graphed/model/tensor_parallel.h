// model/tensor_parallel.h — tensor parallelism as the model sees it: the collectives a rank needs over its
// tensor-parallel group (dist/ implements them; the model only calls them), and Megatron's four region
// mappings (mappings.py) as autograd functions. A column-parallel layer enters its region through
// copy_to_tensor_region and a row-parallel one leaves through reduce_from_tensor_region, so the forward
// has one all-reduce per pair and the backward one too.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace graphed::model {

class TensorCollectives {
 public:
  virtual ~TensorCollectives() = default;
  virtual int64_t size() const = 0;
  virtual int64_t rank() const = 0;
  /// The sum of `tensor` over the ranks, in a fixed rank order (the same bits on every rank).
  virtual at::Tensor all_reduce_sum(const at::Tensor& tensor) = 0;
  /// Every rank's `tensor` (the same shape on each), concatenated along `dim` in rank order.
  virtual at::Tensor all_gather(const at::Tensor& tensor, int64_t dim) = 0;
};

/// Forward: the input as is; backward: the gradient summed over the ranks (the input of a column-parallel
/// layer, which every rank uses whole).
at::Tensor copy_to_tensor_region(const at::Tensor& input, TensorCollectives& collectives);
/// Forward: the partial results summed over the ranks (the output of a row-parallel layer); backward: the
/// gradient as is.
at::Tensor reduce_from_tensor_region(const at::Tensor& input, TensorCollectives& collectives);
/// Forward: every rank's part of the last dimension gathered; backward: this rank's part of the gradient.
at::Tensor gather_from_tensor_region(const at::Tensor& input, TensorCollectives& collectives);
/// Forward: this rank's part of the last dimension; backward: every rank's gradient part gathered.
at::Tensor scatter_to_tensor_region(const at::Tensor& input, TensorCollectives& collectives);

}  // namespace graphed::model
