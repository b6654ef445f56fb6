// model/paged_experts.cpp — see model/paged_experts.h.
#include "graphed/model/paged_experts.h"

#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include "graphed/capture/capture_state.h"
#include "graphed/kernels/grouped_gemm_ops.h"
#include "graphed/kernels/moe_routing_ops.h"

namespace graphed::model {
namespace {

using torch::autograd::variable_list;

/// The backward of paged_grouped_mlp: takes the parked rows back and runs the products' backward in reverse.
struct PagedGroupedMlpBackward final : torch::autograd::Node {
  kernels::PagedStash* stash = nullptr;
  kernels::StashedRows parked;  ///< the experts' input, fc1's output, the activation's output
  GroupedMlpWeights weights;
  at::Tensor offsets;

  std::string name() const override { return "PagedGroupedMlpBackward"; }

  /// Gradients for {rows, fc1, fc1_bias, fc2, fc2_bias}.
  variable_list apply(variable_list&& grads) override {
    const std::vector<at::Tensor> kept = stash->take(parked);
    at::Tensor grad_product = grads[0];
    at::Tensor grad_fc2_bias;
    if (weights.fc2_bias.defined()) {
      // The bias's gradient is each expert's column sums; the product's is grad itself (no activation follows, so
      // the kernel reads nothing of the product it would be given: grad stands in for it).
      const at::Tensor stand_in = grads[0].to(weights.type).contiguous();  // fc2's output type
      const kernels::BiasActivationGrads bias = kernels::grouped_bias_activation_backward(
          grads[0], stand_in, weights.fc2_bias, offsets, kernels::ExpertActivation::kNone);
      grad_product = bias.hidden;
      grad_fc2_bias = bias.bias;
    }
    const kernels::GroupedMatmulGrads second =
        kernels::grouped_matmul_backward(grad_product, kept[2], weights.fc2, offsets);
    const kernels::BiasActivationGrads activation =
        kernels::grouped_bias_activation_backward(second.input, kept[1], weights.fc1_bias, offsets, weights.activation);
    const kernels::GroupedMatmulGrads first =
        kernels::grouped_matmul_backward(activation.hidden, kept[0], weights.fc1, offsets);
    return {first.input, first.weight, activation.bias, second.weight, grad_fc2_bias};
  }

  void release_variables() override {
    parked = kernels::StashedRows();
    weights = GroupedMlpWeights();
    offsets.reset();
  }
};

}  // namespace

GroupedMlpPass grouped_mlp(const at::Tensor& rows, const GroupedMlpWeights& weights, const at::Tensor& offsets) {
  // Each row gets its expert's biases inside the activation's kernel (kernels::grouped_bias_activation: their
  // gradients are each expert's column sums in a fixed order, where a gather's backward would add with atomics).
  GroupedMlpPass pass;
  pass.hidden = kernels::grouped_matmul(rows, weights.fc1, offsets);
  pass.activated =
      kernels::grouped_bias_activation(pass.hidden, weights.fc1_bias, offsets, weights.activation, weights.type);
  pass.output = kernels::grouped_matmul(pass.activated, weights.fc2, offsets);
  if (weights.fc2_bias.defined()) {
    pass.output =
        kernels::grouped_bias_activation(pass.output, weights.fc2_bias, offsets, kernels::ExpertActivation::kNone,
                                         at::promote_types(pass.output.scalar_type(), weights.fc2_bias.scalar_type()));
  }
  return pass;
}

at::Tensor paged_grouped_mlp(const at::Tensor& rows, const GroupedMlpWeights& weights, const at::Tensor& offsets,
                             const at::Tensor& real_rows, int64_t balanced_rows, kernels::PagedStash& stash) {
  GroupedMlpPass pass;
  {
    at::NoGradGuard no_grad;  // the node below is the products' one backward
    pass = grouped_mlp(rows, weights, offsets);
  }
  at::Tensor out = pass.output;
  if (!torch::autograd::compute_requires_grad(rows, weights.fc1, weights.fc1_bias, weights.fc2, weights.fc2_bias)) {
    return out;
  }
  const std::shared_ptr<PagedGroupedMlpBackward> node(new PagedGroupedMlpBackward(), torch::autograd::deleteNode);
  node->set_next_edges(
      torch::autograd::collect_next_edges(rows, weights.fc1, weights.fc1_bias, weights.fc2, weights.fc2_bias));
  node->stash = &stash;
  // The stash's profiling iteration reads the real rows on the host, which a graph being captured cannot.
  node->parked =
      stash.put({rows, pass.hidden, pass.activated}, real_rows, balanced_rows, !capture::is_graph_capturing());
  node->weights = weights;
  node->offsets = offsets;
  torch::autograd::set_history(out, node);
  return out;
}

}  // namespace graphed::model
