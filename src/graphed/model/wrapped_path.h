// model/wrapped_path.h — a kernel path that runs another path's kernels except where it overrides them: the
// base of the decorators over a model's path (model/fp8_path.h over the fused path for FP8 training,
// model/fp8_weights_path.h over any path for decoding with FP8 weights), so each names only what it changes.
#pragma once

#include <memory>
#include <utility>

#include "graphed/model/kernel_path.h"
#include "graphed/util/error.h"

namespace graphed::model {

class WrappedPath : public KernelPath {
 public:
  explicit WrappedPath(std::shared_ptr<const KernelPath> inner) : inner_(std::move(inner)) {
    GRAPHED_INTERNAL_ASSERT(inner_ != nullptr, "a wrapped kernel path needs the path it wraps");
  }

  at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) const override {
    return inner_->linear(input, weight, bias);
  }
  at::Tensor inference_linear(const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& bias) const override {
    return inner_->inference_linear(input, weight, bias);
  }
  at::Tensor decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           const kernels::LinearInput& first, const at::Tensor& residual) const override {
    return inner_->decode_linear(input, weight, bias, first, residual);
  }
  at::Tensor inference_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                            double epsilon) const override {
    return inner_->inference_norm(input, weight, bias, epsilon);
  }
  at::Tensor rope_into_paged_cache(const at::Tensor& qkv, const PagedCacheWrite& write) const override {
    return inner_->rope_into_paged_cache(qkv, write);
  }
  at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                             const kernels::PagedContext& context, double scale) const override {
    return inner_->paged_attention(query, key_cache, value_cache, context, scale);
  }
  at::Tensor norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                  double epsilon) const override {
    return inner_->norm(input, weight, bias, epsilon);
  }
  kernels::NormedStream residual_norm(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                                      double epsilon) const override {
    return inner_->residual_norm(hidden, weight, bias, epsilon);
  }
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const override {
    return inner_->rope(x, cos, sin);
  }
  at::Tensor swiglu(const at::Tensor& x) const override { return inner_->swiglu(x); }
  at::Tensor residual_add(const at::Tensor& hidden, const at::Tensor& update) const override {
    return inner_->residual_add(hidden, update);
  }
  at::Tensor working_weight(const at::Tensor& master, at::ScalarType type) const override {
    return inner_->working_weight(master, type);
  }
  at::Tensor logits(const at::Tensor& normed, const at::Tensor& weight) const override {
    return inner_->logits(normed, weight);
  }
  bool fuses_output_loss() const override { return inner_->fuses_output_loss(); }
  at::Tensor linear_cross_entropy(const at::Tensor& normed, const at::Tensor& weight,
                                  const at::Tensor& labels) const override {
    return inner_->linear_cross_entropy(normed, weight, labels);
  }
  // Not forwarded: norm_linear and swiglu_linear, which compose this path's own norm or swiglu and linear; end_step and
  // weights_loaded, which the model calls once on each distinct path it holds (GptModel::end_step).

 protected:
  const KernelPath& inner() const { return *inner_; }

 private:
  std::shared_ptr<const KernelPath> inner_;
};

}  // namespace graphed::model
