// util/compat.h — every difference between the two LibTorch flavours graphed builds against lives
// here: Debian's libtorch-dev 1.13 (CPU: developer machines and CI) and the pip wheel's LibTorch 2.x
// (CUDA: GPU machines). Code elsewhere never tests TORCH_VERSION_* itself. Inline, header-only.
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <atomic>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

/// True when the LibTorch being compiled against is at least major.minor.
#define GRAPHED_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#ifndef GRAPHED_CUDA
#define GRAPHED_CUDA 0
#endif

namespace graphed::compat {

/// Causal scaled-dot-product attention over [batch, heads, seq, head_dim] tensors (same head count
/// for q, k and v). 2.x: at::scaled_dot_product_attention (cuDNN/flash on Hopper, capturable);
/// 1.13: the math path written out (1.13's private SDPA has no causal backward on every backend).
inline at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p) {
#if GRAPHED_TORCH_AT_LEAST(2, 0)
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout_p, /*is_causal=*/true);
#else
  const int64_t seq = q.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  const at::Tensor future = at::ones({seq, seq}, q.options().dtype(at::kBool)).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  at::Tensor probs = at::softmax(scores, -1);
  if (dropout_p > 0.0) probs = at::dropout(probs, dropout_p, /*train=*/true);
  return at::matmul(probs, v);
#endif
}

/// Attention over [batch, heads, seq, head_dim] tensors where each query sees the keys `allowed`
/// ([q seq, k seq] bool, true = attend) says. 2.x: at::scaled_dot_product_attention with the mask
/// (the memory-efficient kernel on Hopper: cost grows with q seq x k seq); 1.13: the math path.
inline at::Tensor masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& allowed) {
#if GRAPHED_TORCH_AT_LEAST(2, 0)
  return at::scaled_dot_product_attention(q, k, v, allowed);
#else
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const at::Tensor scores = (at::matmul(q, k.transpose(-2, -1)) * scale)
                                .masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1), v);
#endif
}

/// Whether LibTorch has at::_grouped_mm (2.8 and later): bf16 grouped GEMMs with the groups' ends on the device.
constexpr bool kHasGroupedMm = GRAPHED_TORCH_AT_LEAST(2, 8);

/// at::_grouped_mm(input [M, K], weight [G, K, N], ends int32 [G]) where LibTorch has it (kHasGroupedMm); never
/// called elsewhere.
inline at::Tensor grouped_mm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& ends) {
#if GRAPHED_TORCH_AT_LEAST(2, 8)
  return at::_grouped_mm(input, weight, ends);
#else
  (void)weight;
  (void)ends;
  TORCH_CHECK(false, "at::_grouped_mm needs LibTorch 2.8 or later");
  return input;
#endif
}

/// Whether CUDA autocast is on (a graph captured later must run under the same setting).
inline bool cuda_autocast_enabled() {
#if GRAPHED_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(at::kCUDA);
#else
  return at::autocast::is_enabled();
#endif
}

/// Whether CUDA autocast is on with its weight-cast cache (which a CUDA-graph capture must not use:
/// cached casts would outlive the capture that made them).
inline bool cuda_autocast_caching() { return cuda_autocast_enabled() && at::autocast::is_autocast_cache_enabled(); }

/// Turns bf16 autocast on CUDA on or off for its lifetime, with the cast cache off (required
/// while capturing CUDA graphs), and restores the previous state.
class AutocastScope {
 public:
  explicit AutocastScope(bool enabled) {
#if GRAPHED_TORCH_AT_LEAST(2, 4)
    previous_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
    previous_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
    at::autocast::set_autocast_enabled(at::kCUDA, enabled);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
#else
    previous_enabled_ = at::autocast::is_enabled();
    previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
#endif
    previous_cache_ = at::autocast::is_autocast_cache_enabled();
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~AutocastScope() {
#if GRAPHED_TORCH_AT_LEAST(2, 4)
    at::autocast::set_autocast_enabled(at::kCUDA, previous_enabled_);
    at::autocast::set_autocast_dtype(at::kCUDA, previous_dtype_);
#else
    at::autocast::set_enabled(previous_enabled_);
    at::autocast::set_autocast_gpu_dtype(previous_dtype_);
#endif
    at::autocast::set_autocast_cache_enabled(previous_cache_);
    at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool previous_enabled_ = false;
  bool previous_cache_ = true;
  at::ScalarType previous_dtype_ = at::kBFloat16;
};

/// One AdamW step (decoupled weight decay, bias correction) over every parameter, reading the step
/// counts and the learning rate from device tensors so that the call is capturable in a CUDA graph.
/// Increments each state_steps entry by one. grads are divided by grad_scale when given (used for
/// sync-free clipping: grad_scale = 1 / clip coefficient). CUDA on 2.x: at::_fused_adamw_ (one
/// multi-tensor kernel); elsewhere the same arithmetic per tensor.
inline void adamw_step(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                       const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
                       const std::vector<at::Tensor>& state_steps, const at::Tensor& lr, double beta1, double beta2,
                       double weight_decay, double eps, const std::optional<at::Tensor>& grad_scale) {
#if GRAPHED_TORCH_AT_LEAST(2, 2)
  if (!params.empty() && params.front().is_cuda()) {
    at::_foreach_add_(state_steps, 1);
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, state_steps, lr, beta1, beta2,
                      weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false, grad_scale,
                      /*found_inf=*/std::nullopt);
    return;
  }
#endif
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& step = state_steps[i];
    step.add_(1);
    const at::Tensor grad = grad_scale ? grads[i] / *grad_scale : grads[i];
    params[i].mul_(1.0 - lr * weight_decay);
    exp_avgs[i].lerp_(grad, 1.0 - beta1);
    exp_avg_sqs[i].mul_(beta2).addcmul_(grad, grad, 1.0 - beta2);
    const at::Tensor bias1 = 1.0 - at::pow(beta1, step);
    const at::Tensor bias2_sqrt = at::sqrt(1.0 - at::pow(beta2, step));
    const at::Tensor denom = exp_avg_sqs[i].sqrt() / bias2_sqrt + eps;
    params[i].sub_(exp_avgs[i] / denom * (lr / bias1));
  }
}

/// Sends the calling thread's LibTorch warnings (TORCH_WARN) to `sink` instead of stderr: the handler's
/// signature differs between 1.13 and 2.x.
inline void route_library_warnings(void (*sink)(const std::string&)) {
  struct Handler final : c10::WarningHandler {
    void (*sink)(const std::string&) = nullptr;
#if TORCH_VERSION_MAJOR >= 2
    void process(const c10::Warning& warning) override { sink(warning.msg()); }
#else
    void process(const c10::SourceLocation&, const std::string& message, const bool) override { sink(message); }
#endif
  };
  static Handler handler;
  handler.sink = sink;
#if TORCH_VERSION_MAJOR >= 2
  c10::WarningUtils::set_warning_handler(&handler);
#else
  c10::Warning::set_warning_handler(&handler);
#endif
}

/// Counts the bytes LibTorch's CPU allocator hands out while it lives (what a step allocates, in tests), passing
/// every call on to the allocator it replaced. The interface differs: 2.3 made allocate() non-const and added
/// copy_data().
class CountedCpuAllocations {
 public:
  CountedCpuAllocations() : counter_(c10::GetCPUAllocator()) { c10::SetCPUAllocator(&counter_, kPriority); }
  ~CountedCpuAllocations() { c10::SetCPUAllocator(counter_.base, kPriority); }
  CountedCpuAllocations(const CountedCpuAllocations&) = delete;
  CountedCpuAllocations& operator=(const CountedCpuAllocations&) = delete;

  std::size_t bytes() const { return counter_.bytes.load(); }

 private:
  static constexpr uint8_t kPriority = 200;  // above the default allocator's registration
  struct Counter final : c10::Allocator {
    explicit Counter(c10::Allocator* base) : base(base) {}
#if GRAPHED_TORCH_AT_LEAST(2, 3)
    c10::DataPtr allocate(std::size_t n) override {
      bytes += n;
      return base->allocate(n);
    }
    void copy_data(void* dest, const void* src, std::size_t count) const override { base->copy_data(dest, src, count); }
#else
    c10::DataPtr allocate(std::size_t n) const override {
      bytes += n;
      return base->allocate(n);
    }
#endif
    c10::DeleterFnPtr raw_deleter() const override { return base->raw_deleter(); }

    c10::Allocator* base;  // not owned: LibTorch's
    mutable std::atomic<std::size_t> bytes{0};
  };
  Counter counter_;
};

}  // namespace graphed::compat
