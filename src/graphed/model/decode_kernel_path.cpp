// model/decode_kernel_path.cpp — see model/decode_kernel_path.h.
#include "graphed/model/decode_kernel_path.h"

#include <utility>

#include "graphed/kernels/decode_ops.h"
#include "graphed/kernels/paged_attention_ops.h"

namespace graphed::model {
namespace {

class DecodeKernelPath final : public WrappedPath {
 public:
  explicit DecodeKernelPath(std::shared_ptr<const KernelPath> inner) : WrappedPath(std::move(inner)) {}

  at::Tensor inference_linear(const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& bias) const override {
    return kernels::decode_linear(input, weight, bias);  // LibTorch's linear where the row kernel does not fit
  }
  at::Tensor decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           const kernels::LinearInput& first, const at::Tensor& residual) const override {
    if (!takes(input, first.norm_weight)) return inner().decode_linear(input, weight, bias, first, residual);
    return kernels::decode_linear(input, weight, bias, first, residual);
  }
  at::Tensor inference_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                            double epsilon) const override {
    if (bias.defined() || !takes(input, weight)) return inner().inference_norm(input, weight, bias, epsilon);
    return kernels::rms_norm(input, weight, epsilon);  // RMSNorm: LayerNorm has a bias
  }
  at::Tensor rope_into_paged_cache(const at::Tensor& qkv, const PagedCacheWrite& write) const override {
    if (!takes(qkv, write.cos)) return inner().rope_into_paged_cache(qkv, write);
    return kernels::rope_into_paged_cache(qkv, write.positions, write.cache_rows, write.cos, write.sin, write.key_cache,
                                          write.value_cache, write.heads, write.groups, write.head_dim);
  }
  at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                             const kernels::PagedContext& context, double scale) const override {
    return kernels::paged_attention(query, key_cache, value_cache, context, scale);  // the reference where it must
  }

 private:
  /// Whether the decode kernels take `input` (bf16 on a GPU) with `companion` (a norm weight or a rotary
  /// table; undefined when there is none) of its dtype.
  static bool takes(const at::Tensor& input, const at::Tensor& companion) {
    return kernels::decode_kernels_supported(input) &&
           (!companion.defined() || companion.scalar_type() == input.scalar_type());
  }
};

}  // namespace

std::shared_ptr<const KernelPath> with_decode_kernels(std::shared_ptr<const KernelPath> inner) {
  return std::make_shared<const DecodeKernelPath>(std::move(inner));
}

}  // namespace graphed::model
