// kernels/decode_ops_cpu.cpp — kernels/decode_ops.h on a CPU build, in place of decode_ops_cuda.cpp (one
// convention for the two builds: src/graphed/CMakeLists.txt): no tensor takes the fused path, so the model keeps
// its LibTorch ops; the launches are never reached.
#include "graphed/kernels/decode_ops.h"

#include "graphed/util/error.h"

namespace graphed::kernels {
namespace {

[[noreturn]] at::Tensor unreachable(const char* what) {
  GRAPHED_INTERNAL_ASSERT(false, what, " needs a CUDA build (decode_kernels_supported() was not checked)");
  throw;  // unreachable
}

}  // namespace

bool decode_kernels_supported(const at::Tensor&) { return false; }
at::Tensor rms_norm(const at::Tensor&, const at::Tensor&, double) { unreachable("rms_norm"); }
at::Tensor rope_into_paged_cache(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                 const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t) {
  unreachable("rope_into_paged_cache");
}
at::Tensor silu_and_mul(const at::Tensor&) { unreachable("silu_and_mul"); }
at::Tensor transformed_input(const at::Tensor& input, const LinearInput& first) {
  if (first.transform != RowTransform::kNone) unreachable("decode_linear's fused input transform");
  return input;
}
bool row_linear_takes(const at::Tensor&, const at::Tensor&, const at::Tensor&, const LinearInput&, const at::Tensor&) {
  return false;
}
at::Tensor row_linear(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const LinearInput&,
                      const at::Tensor&) {
  unreachable("row_linear");
}
at::Tensor decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                         const LinearInput& first, const at::Tensor& residual) {
  const at::Tensor output = at::linear(transformed_input(input, first), weight, bias);
  return residual.defined() ? residual + output : output;
}

}  // namespace graphed::kernels
