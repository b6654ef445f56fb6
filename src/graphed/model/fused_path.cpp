// model/fused_path.cpp — see model/fused_path.h.
#include "graphed/model/fused_path.h"

#include <set>

#include "graphed/capture/capture_state.h"
#include "graphed/kernels/training_ops.h"
#include "graphed/kernels/working_copy.h"
#include "graphed/util/error.h"

namespace graphed::model {

bool reads_only_working_copy(const std::string& name) {
  static const std::set<std::string> weights = {"qkv_weight",     "proj_weight",     "fc1_weight",    "fc2_weight",
                                                "in_proj_weight", "out_proj_weight", "output_weight", "router_weight"};
  const std::size_t dot = name.rfind('.');
  return weights.count(dot == std::string::npos ? name : name.substr(dot + 1)) > 0;
}

FusedPath::FusedPath(const std::vector<std::pair<at::Tensor, at::Tensor>>& copies, at::ScalarType activation_type,
                     bool accumulate_in_place)
    : activation_type_(activation_type), accumulate_in_place_(accumulate_in_place) {
  for (const auto& [master, copy] : copies) copies_.emplace(master.unsafeGetTensorImpl(), copy);
}

at::Tensor FusedPath::copy_of(const at::Tensor& master) const {
  if (!master.defined()) return {};
  const auto found = copies_.find(master.unsafeGetTensorImpl());
  if (found == copies_.end()) return at::Tensor();
  if (waiter_) waiter_(master);
  return found->second;
}

at::Tensor FusedPath::linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const {
  return kernels::linear(input, weight, copy_of(weight), bias, copy_of(bias), accumulates_in_place());
}

at::Tensor FusedPath::working_weight(const at::Tensor& master, at::ScalarType type) const {
  const at::Tensor copy = copy_of(master);
  if (!copy.defined() || copy.scalar_type() != type) {
    GRAPHED_INTERNAL_ASSERT(master.numel() == 0 || master.storage().nbytes() > 0,
                            "a released parameter (its values kept elsewhere) read without its working copy: "
                            "model::reads_only_working_copy names a weight the model reads otherwise");
    return master.to(type);
  }
  return kernels::working_copy(master, copy, accumulates_in_place());
}

bool FusedPath::accumulates_in_place() const {
  // A per-layer engine's warmup runs the backward only to look at the gradients (autograd::grad): .grad
  // stays untouched. A full-iteration graph's warmup steps are ordinary iterations and accumulate in place
  // as eager steps and the graph do, so their bits are the same whatever cuBLAS picks for beta = 1.
  return accumulate_in_place_ && !capture::is_gradient_probe();
}

at::Tensor FusedPath::norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           double epsilon) const {
  return kernels::norm(input, weight, bias, epsilon, activation_type_, accumulates_in_place());
}

kernels::NormedStream FusedPath::residual_norm(const at::Tensor& hidden, const at::Tensor& weight,
                                               const at::Tensor& bias, double epsilon) const {
  return kernels::residual_norm(hidden, weight, bias, epsilon, activation_type_, accumulates_in_place());
}

at::Tensor FusedPath::rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const {
  return kernels::rope(x, cos, sin);
}

at::Tensor FusedPath::swiglu(const at::Tensor& x) const { return kernels::swiglu(x); }

at::Tensor FusedPath::residual_add(const at::Tensor& hidden, const at::Tensor& update) const {
  return kernels::residual_add(hidden, update);
}

at::Tensor FusedPath::logits(const at::Tensor& normed, const at::Tensor& weight) const {
  return kernels::linear(normed, weight, copy_of(weight), {}, {}).to(at::kFloat);
}

at::Tensor FusedPath::linear_cross_entropy(const at::Tensor& normed, const at::Tensor& weight,
                                           const at::Tensor& labels) const {
  return kernels::linear_cross_entropy(normed, weight, copy_of(weight), labels, accumulates_in_place());
}

}  // namespace graphed::model
