// model/expert_parallel.cpp — see model/expert_parallel.h. The autograd function keeps the collectives by
// address (they outlive the step's graph: they belong to the run) and its splits by value.
#include "graphed/model/expert_parallel.h"

#include <torch/csrc/autograd/custom_function.h>

#include "graphed/util/error.h"

namespace graphed::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

struct AllToAllRegion : torch::autograd::Function<AllToAllRegion> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, int64_t collectives,
                            std::vector<int64_t> output_splits, std::vector<int64_t> input_splits) {
    context->saved_data["collectives"] = collectives;
    context->saved_data["output_splits"] = output_splits;
    context->saved_data["input_splits"] = input_splits;
    return reinterpret_cast<ExpertCollectives*>(collectives)->all_to_all(input, output_splits, input_splits);
  }
  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    auto& collectives = *reinterpret_cast<ExpertCollectives*>(context->saved_data["collectives"].toInt());
    // The rows came in as output_splits and went out as input_splits: their gradients go back the other way.
    const std::vector<int64_t> came_in = context->saved_data["output_splits"].toIntVector();
    const std::vector<int64_t> went_out = context->saved_data["input_splits"].toIntVector();
    return {collectives.all_to_all(grads[0].contiguous(), went_out, came_in), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor all_to_all_region(const at::Tensor& input, ExpertCollectives& collectives,
                             std::vector<int64_t> output_splits, std::vector<int64_t> input_splits) {
  return AllToAllRegion::apply(input, reinterpret_cast<int64_t>(&collectives), std::move(output_splits),
                               std::move(input_splits));
}

at::Tensor ExpertParallel::exchange(const at::Tensor& rows, std::vector<int64_t> output_splits,
                                    std::vector<int64_t> input_splits) const {
  GRAPHED_INTERNAL_ASSERT(collectives_ != nullptr, "an all-to-all on one expert rank");
  return all_to_all_region(rows, *collectives_, std::move(output_splits), std::move(input_splits));
}

at::Tensor ExpertParallel::gather(const at::Tensor& counts) const {
  if (!collectives_) return counts.unsqueeze(0);
  return collectives_->all_gather(counts.detach().contiguous());
}

}  // namespace graphed::model
