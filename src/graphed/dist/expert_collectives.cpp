// dist/expert_collectives.cpp — see dist/expert_collectives.h. Both operations work on fresh tensors, so the
// caller's input is never changed.
#include "graphed/dist/expert_collectives.h"

#include <numeric>

namespace graphed::dist {

at::Tensor GroupExpertCollectives::all_to_all(const at::Tensor& input, const std::vector<int64_t>& output_splits,
                                              const std::vector<int64_t>& input_splits) {
  at::Tensor rows = input.contiguous();
  std::vector<int64_t> sizes = rows.sizes().vec();
  sizes[0] =
      output_splits.empty() ? rows.size(0) : std::accumulate(output_splits.begin(), output_splits.end(), int64_t{0});
  at::Tensor output = at::empty(sizes, rows.options());
  group_.all_to_all(output, rows, output_splits, input_splits).wait();
  return output;
}

at::Tensor GroupExpertCollectives::all_gather(const at::Tensor& tensor) {
  at::Tensor input = tensor.contiguous();
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < size(); ++r) parts.push_back(at::empty_like(input));
  group_.all_gather(parts, input).wait();
  return at::stack(parts);
}

}  // namespace graphed::dist
