// kernels/fp8_scaling.cpp — see kernels/fp8_scaling.h. Plain ATen operations on device tensors: no value is
// read back to the host, so the same code runs eagerly and inside a capture.
#include "graphed/kernels/fp8_scaling.h"

#include <cmath>
#include <limits>

#include "graphed/util/error.h"

namespace graphed::kernels {

double fp8_max(Fp8Format format) { return format == Fp8Format::kE4M3 ? 448.0 : 57344.0; }

Fp8ScalingState::Fp8ScalingState(int64_t tensors, Fp8Format format, const DelayedScaling& recipe,
                                 const at::Device& device)
    : format_(format), recipe_(recipe) {
  GRAPHED_INTERNAL_ASSERT(tensors > 0 && recipe.history_length > 0 && recipe.margin >= 0,
                          "an FP8 scaling state needs tensors, a history and a margin >= 0");
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  amax_history_ = at::zeros({recipe.history_length, tensors}, options);
  scale_ = at::ones({tensors}, options);
  scale_inverse_ = at::ones({tensors}, options);
}

void Fp8ScalingState::record_amax(int64_t index, const at::Tensor& x) {
  at::Tensor slot = amax_history_.select(0, 0).narrow(0, index, 1);
  slot.copy_(at::maximum(slot, x.detach().abs().amax().to(at::kFloat).reshape({1})));
}

void Fp8ScalingState::update() {
  const at::Tensor amax =
      recipe_.algorithm == AmaxAlgorithm::kMax ? std::get<0>(amax_history_.max(0)) : amax_history_.select(0, 0);
  const double headroom = fp8_max(format_) / std::ldexp(1.0, static_cast<int>(recipe_.margin));
  at::Tensor next = at::where(at::isfinite(amax) & (amax > 0), headroom / amax, scale_);
  next = at::where(at::isinf(next), at::full_like(next, std::numeric_limits<float>::max()), next);
  scale_.copy_(next);
  scale_inverse_.copy_(at::reciprocal(next));
  amax_history_.copy_(amax_history_.roll(-1, 0));
  amax_history_.select(0, 0).zero_();
}

Fp8Slot slot_of(const Fp8ScalingState& state, int64_t index) {
  GRAPHED_INTERNAL_ASSERT(index >= 0 && index < state.scale().numel(), "an FP8 slot outside its state");
  return {state.scale().narrow(0, index, 1), state.scale_inverse().narrow(0, index, 1),
          state.amax_history().select(0, 0).narrow(0, index, 1)};
}

}  // namespace graphed::kernels
