// model/kernel_path.cpp — see model/kernel_path.h: the ATen path.
#include "graphed/model/kernel_path.h"

#include "graphed/kernels/training_ops.h"
#include "graphed/util/error.h"

namespace graphed::model {
namespace {

class AtenPath final : public KernelPath {
 public:
  explicit AtenPath(bool decode_kernels) : decode_kernels_(decode_kernels) {}

  at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const override {
    return at::linear(input, weight, bias);
  }
  at::Tensor inference_linear(const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& bias) const override {
    return decode_kernels_ ? kernels::decode_linear(input, weight, bias) : at::linear(input, weight, bias);
  }
  at::Tensor decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           const kernels::LinearInput& first, const at::Tensor& residual) const override {
    if (decode_kernels_) return kernels::decode_linear(input, weight, bias, first, residual);
    GRAPHED_INTERNAL_ASSERT(first.transform == kernels::RowTransform::kNone,
                            "a fused input transform asked of the path without decode kernels");
    const at::Tensor output = at::linear(input, weight, bias);
    return residual.defined() ? residual + output : output;
  }
  bool decode_kernels() const override { return decode_kernels_; }

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

 private:
  bool decode_kernels_;
};

}  // namespace

std::shared_ptr<const KernelPath> aten_path(bool decode_kernels) {
  static const auto with = std::make_shared<const AtenPath>(true);
  static const auto without = std::make_shared<const AtenPath>(false);
  return decode_kernels ? with : without;
}

}  // namespace graphed::model
