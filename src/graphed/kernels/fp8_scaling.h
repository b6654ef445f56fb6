// kernels/fp8_scaling.h — FP8 delayed scaling (TransformerEngine's recipe; Megatron's --fp8-recipe delayed): the
// amax history and scales of a set of tensors, kept on their device and updated without a host sync, so the
// update can run inside a CUDA graph. The FP8 linears (kernels/fp8_linear.h) read the scales through slots.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace graphed::kernels {

/// E4M3 (forward tensors) or E5M2 (gradients, in the hybrid format).
enum class Fp8Format { kE4M3, kE5M2 };

/// The largest finite value of the format: 448 (E4M3), 57,344 (E5M2).
double fp8_max(Fp8Format format);

/// Which amax a scale follows: the last step's, or the largest in the history window.
enum class AmaxAlgorithm { kMostRecent, kMax };

struct DelayedScaling {
  int64_t history_length = 1;  ///< Megatron's default (TransformerEngine's own is 1,024)
  int64_t margin = 0;          ///< the scale leaves 2^margin of headroom
  AmaxAlgorithm algorithm = AmaxAlgorithm::kMostRecent;
};

/// The scaling state of `tensors` tensors of one format. A step quantizes with `scale` and records each
/// tensor's amax in row 0 of the history; update() then makes the next step's scales and rolls the history.
class Fp8ScalingState {
 public:
  /// Scales start at 1 and the history at 0, as fp32 on `device`.
  Fp8ScalingState(int64_t tensors, Fp8Format format, const DelayedScaling& recipe, const at::Device& device);

  /// Row 0 of the history takes max(itself, max |x|) for tensor `index` (the quantizing kernels will do this
  /// as they cast; this is the reference).
  void record_amax(int64_t index, const at::Tensor& x);
  /// scale = fp8_max / 2^margin / amax where amax is finite and above 0 (else the scale stays; an infinite
  /// one becomes the largest float); scale_inverse = 1 / scale; then the history rolls one row (row 0 moves
  /// to the last slot) and row 0 is zeroed for the next step. In place: the tensors keep their addresses.
  void update();

  const at::Tensor& amax_history() const { return amax_history_; }    ///< [history_length, tensors]
  const at::Tensor& scale() const { return scale_; }                  ///< [tensors]: x * scale fits the format
  const at::Tensor& scale_inverse() const { return scale_inverse_; }  ///< [tensors]: what a GEMM multiplies back
  Fp8Format format() const { return format_; }

 private:
  Fp8Format format_;
  DelayedScaling recipe_;
  at::Tensor amax_history_;
  at::Tensor scale_;
  at::Tensor scale_inverse_;
};

/// One tensor's delayed scale: [1] views of one slot of an Fp8ScalingState (its scale, inverse scale and the
/// history's row 0, where a cast records the amax). Undefined tensors: current scaling.
struct Fp8Slot {
  at::Tensor scale;
  at::Tensor scale_inverse;
  at::Tensor amax;
};
/// Slot `index` of `state`: views, so they follow update().
Fp8Slot slot_of(const Fp8ScalingState& state, int64_t index);

}  // namespace graphed::kernels
