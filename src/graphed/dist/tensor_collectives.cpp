// dist/tensor_collectives.cpp — see dist/tensor_collectives.h. Both operations work on fresh tensors, so
// the caller's input is never changed.
#include "graphed/dist/tensor_collectives.h"

#include <vector>

namespace graphed::dist {

at::Tensor GroupTensorCollectives::all_reduce_sum(const at::Tensor& tensor) {
  at::Tensor sum = tensor.contiguous().clone();
  group_.all_reduce_sum(sum).wait();
  return sum;
}

at::Tensor GroupTensorCollectives::all_gather(const at::Tensor& tensor, int64_t dim) {
  at::Tensor input = tensor.contiguous();
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < size(); ++r) parts.push_back(at::empty_like(input));
  group_.all_gather(parts, input).wait();
  return at::cat(parts, dim);
}

at::Tensor GroupTensorCollectives::reduce_scatter_sum(const at::Tensor& tensor, int64_t dim) {
  // The communicator scatters dimension 0: `dim` goes first and comes back after.
  at::Tensor input = tensor.movedim(dim, 0).contiguous();
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes[0] /= size();
  at::Tensor part = at::empty(sizes, input.options());
  group_.reduce_scatter_sum(part, input).wait();
  return part.movedim(0, dim);
}

}  // namespace graphed::dist
