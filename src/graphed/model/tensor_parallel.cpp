// model/tensor_parallel.cpp — see model/tensor_parallel.h. Each mapping is an autograd function whose
// context keeps the collectives by address (they outlive the step's graph: they belong to the run).
#include "graphed/model/tensor_parallel.h"

#include <torch/csrc/autograd/custom_function.h>

#include "graphed/util/error.h"

namespace graphed::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

TensorCollectives& kept(AutogradContext* context) {
  return *reinterpret_cast<TensorCollectives*>(context->saved_data["collectives"].toInt());
}

/// This rank's part of the last dimension (which must divide by the ranks).
at::Tensor own_part(const at::Tensor& tensor, TensorCollectives& collectives) {
  const int64_t width = tensor.size(-1);
  GRAPHED_INTERNAL_ASSERT(width % collectives.size() == 0, "a last dimension of ", width, " split ",
                          collectives.size(), " ways");
  const int64_t part = width / collectives.size();
  return tensor.narrow(-1, collectives.rank() * part, part).contiguous();
}

struct CopyToRegion : torch::autograd::Function<CopyToRegion> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, int64_t collectives) {
    context->saved_data["collectives"] = collectives;
    return input.view_as(input);
  }
  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    return {kept(context).all_reduce_sum(grads[0]), at::Tensor()};
  }
};

struct ReduceFromRegion : torch::autograd::Function<ReduceFromRegion> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& input, int64_t collectives) {
    return reinterpret_cast<TensorCollectives*>(collectives)->all_reduce_sum(input);
  }
  static tensor_list backward(AutogradContext*, tensor_list grads) { return {grads[0], at::Tensor()}; }
};

struct GatherFromRegion : torch::autograd::Function<GatherFromRegion> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, int64_t collectives) {
    context->saved_data["collectives"] = collectives;
    return reinterpret_cast<TensorCollectives*>(collectives)->all_gather(input, input.dim() - 1);
  }
  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    return {own_part(grads[0], kept(context)), at::Tensor()};
  }
};

struct ScatterToRegion : torch::autograd::Function<ScatterToRegion> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, int64_t collectives) {
    context->saved_data["collectives"] = collectives;
    return own_part(input, *reinterpret_cast<TensorCollectives*>(collectives));
  }
  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const at::Tensor& grad = grads[0];
    return {kept(context).all_gather(grad.contiguous(), grad.dim() - 1), at::Tensor()};
  }
};

int64_t address(TensorCollectives& collectives) { return reinterpret_cast<int64_t>(&collectives); }

}  // namespace

at::Tensor copy_to_tensor_region(const at::Tensor& input, TensorCollectives& collectives) {
  return CopyToRegion::apply(input, address(collectives));
}

at::Tensor reduce_from_tensor_region(const at::Tensor& input, TensorCollectives& collectives) {
  return ReduceFromRegion::apply(input, address(collectives));
}

at::Tensor gather_from_tensor_region(const at::Tensor& input, TensorCollectives& collectives) {
  return GatherFromRegion::apply(input, address(collectives));
}

at::Tensor scatter_to_tensor_region(const at::Tensor& input, TensorCollectives& collectives) {
  return ScatterToRegion::apply(input, address(collectives));
}

}  // namespace graphed::model
