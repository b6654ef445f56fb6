// kernels/working_copy.cpp — see kernels/working_copy.h. An autograd function whose forward hands out the copy and
// whose backward sends the copy's gradient to the master; no kernel of its own (the in-place add is ATen's).
#include "graphed/kernels/working_copy.h"

#include <torch/csrc/autograd/custom_function.h>

#include "graphed/kernels/accumulation_listeners.h"
#include "graphed/util/error.h"

namespace graphed::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

bool accumulable(const at::Tensor& master) {
  const at::Tensor& grad = master.grad();
  return grad.defined() && grad.scalar_type() == at::kFloat && grad.is_contiguous() && grad.sizes() == master.sizes();
}

struct WorkingCopyFunction : torch::autograd::Function<WorkingCopyFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& master, const at::Tensor& copy,
                            bool accumulate) {
    context->save_for_backward({master});
    context->saved_data["accumulate"] = accumulate;
    return copy;
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const at::Tensor master = context->get_saved_variables()[0];
    if (context->saved_data["accumulate"].toBool() && accumulable(master)) {
      at::Tensor gradient = master.grad();
      gradient.add_(grads[0]);  // fp32 += the copy's type, one kernel
      gradient_accumulated(master);
      return {at::Tensor(), at::Tensor(), at::Tensor()};
    }
    return {grads[0].to(master.scalar_type()), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor working_copy(const at::Tensor& master, const at::Tensor& copy, bool accumulate) {
  GRAPHED_INTERNAL_ASSERT(copy.sizes() == master.sizes(), "a working copy of shape ", copy.sizes(),
                          " for a parameter of ", master.sizes());
  return WorkingCopyFunction::apply(master, copy, accumulate);
}

}  // namespace graphed::kernels
