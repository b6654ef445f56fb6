// model/kernel_path.cpp — see model/kernel_path.h: the inference operations' LibTorch forms, and the ATen path.
#include "graphed/model/kernel_path.h"

#include "graphed/kernels/training_ops.h"
#include "graphed/util/error.h"

namespace graphed::model {
namespace {

class AtenPath final : public KernelPath {
 public:
  at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const override {
    return at::linear(input, weight, bias);
  }
  at::Tensor inference_linear(const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& bias) const override {
    return at::linear(input, weight, bias);
  }

  at::Tensor norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                  double epsilon) const override {
    return kernels::reference::norm(input, weight, bias, epsilon, input.scalar_type());
  }
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const override {
    return kernels::reference::rope(x, cos, sin);
  }
  at::Tensor swiglu(const at::Tensor& x) const override { return kernels::reference::swiglu(x); }
  at::Tensor residual_add(const at::Tensor& hidden, const at::Tensor& update) const override { return hidden + update; }

  at::Tensor logits(const at::Tensor& normed, const at::Tensor& weight) const override {
    return at::linear(normed, weight).to(at::promote_types(normed.scalar_type(), at::kFloat));
  }
  bool fuses_output_loss() const override { return false; }
  at::Tensor linear_cross_entropy(const at::Tensor&, const at::Tensor&, const at::Tensor&) const override {
    GRAPHED_INTERNAL_ASSERT(false, "the ATen path has no fused output loss (fuses_output_loss() is false)");
    return {};
  }
};

}  // namespace

at::Tensor KernelPath::transformed(const at::Tensor& input, const kernels::LinearInput& first) const {
  switch (first.transform) {
    case kernels::RowTransform::kRmsNorm: return inference_norm(input, first.norm_weight, {}, first.epsilon);
    case kernels::RowTransform::kSwiglu: return kernels::reference::swiglu(input);
    case kernels::RowTransform::kNone: break;
  }
  return input;
}

at::Tensor KernelPath::rope_into_paged_cache(const at::Tensor& qkv, const PagedCacheWrite& write) const {
  const int64_t tokens = qkv.size(0);
  const at::Tensor parts = qkv.view({tokens, write.heads + 2 * write.groups, write.head_dim});
  at::Tensor query = parts.narrow(1, 0, write.heads);
  at::Tensor key = parts.narrow(1, write.heads, write.groups);
  const at::Tensor value = parts.narrow(1, write.heads + write.groups, write.groups);
  if (write.cos.defined()) {  // each token's angles [tokens, 1, head_dim / 2], in the activations' dtype
    const auto angles = [&](const at::Tensor& table) {
      return table.index_select(0, write.positions).view({tokens, 1, -1}).to(qkv.scalar_type());
    };
    const at::Tensor cos = angles(write.cos);
    const at::Tensor sin = angles(write.sin);
    query = kernels::reference::rotate_halves(query, cos, sin);
    key = kernels::reference::rotate_halves(key, cos, sin);
  }
  write.key_cache.view({-1, write.groups, write.head_dim}).index_copy_(0, write.cache_rows, key);
  write.value_cache.view({-1, write.groups, write.head_dim}).index_copy_(0, write.cache_rows, value);
  return query.contiguous();
}

std::shared_ptr<const KernelPath> aten_path() {
  static const auto path = std::make_shared<const AtenPath>();
  return path;
}

}  // namespace graphed::model
