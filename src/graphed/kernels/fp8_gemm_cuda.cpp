// kernels/fp8_gemm_cuda.cpp — see kernels/fp8_gemm.h. CUDA builds only, with no fp8_gemm_cpu.cpp: its one caller
// is fp8_linear_cuda.cpp (src/graphed/CMakeLists.txt). cuBLASLt is column-major and its FP8 kernels take the
// first operand transposed ("TN"): the row-major gradient [out, in] is the column-major D [in, out] = A^T B
// with A = x_transposed seen as [rows, in] and B = dy_transposed seen as [rows, out], k = rows. The functions
// are looked up in the cuBLASLt that LibTorch already loaded (dlsym), so the process holds one copy and the
// build links nothing more. The heuristic's choice is kept per shape and types.
#include "graphed/kernels/fp8_gemm.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <map>
#include <mutex>
#include <tuple>

#include <ATen/cuda/CUDAContext.h>

namespace graphed::kernels {
namespace {

/// The cuBLASLt entry points graphed calls, found once.
struct Cublaslt {
  decltype(&cublasLtMatmulDescCreate) matmul_desc_create = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set = nullptr;
  decltype(&cublasLtMatmulDescDestroy) matmul_desc_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  bool found = false;
};

template <typename Function>
bool look_up(Function& target, const char* name) {
  target = reinterpret_cast<Function>(dlsym(RTLD_DEFAULT, name));
  return target != nullptr;
}

const Cublaslt& cublaslt() {
  static const Cublaslt functions = [] {
    Cublaslt f;
    f.found = look_up(f.matmul_desc_create, "cublasLtMatmulDescCreate") &&
              look_up(f.matmul_desc_set, "cublasLtMatmulDescSetAttribute") &&
              look_up(f.matmul_desc_destroy, "cublasLtMatmulDescDestroy") &&
              look_up(f.layout_create, "cublasLtMatrixLayoutCreate") &&
              look_up(f.layout_destroy, "cublasLtMatrixLayoutDestroy") &&
              look_up(f.preference_create, "cublasLtMatmulPreferenceCreate") &&
              look_up(f.preference_set, "cublasLtMatmulPreferenceSetAttribute") &&
              look_up(f.preference_destroy, "cublasLtMatmulPreferenceDestroy") &&
              look_up(f.heuristic, "cublasLtMatmulAlgoGetHeuristic") && look_up(f.matmul, "cublasLtMatmul");
    return f;
  }();
  return functions;
}

constexpr size_t kWorkspaceBytes = 32u << 20;  // what cuBLASLt's Hopper kernels are tuned for

cudaDataType_t fp8_type(const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kFloat8_e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
}

/// One GEMM's descriptors, destroyed with it.
struct Descriptors {
  const Cublaslt& f;
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  explicit Descriptors(const Cublaslt& functions) : f(functions) {}
  ~Descriptors() {
    if (preference) f.preference_destroy(preference);
    if (c) f.layout_destroy(c);
    if (b) f.layout_destroy(b);
    if (a) f.layout_destroy(a);
    if (operation) f.matmul_desc_destroy(operation);
  }
};

using ShapeKey = std::tuple<int64_t, int64_t, int64_t, int, int, int>;  // m, n, k, A and B types, device

}  // namespace

bool fp8_gemm_accumulate(const at::Tensor& dy_transposed, const at::Tensor& scale_dy, const at::Tensor& x_transposed,
                         const at::Tensor& scale_x, at::Tensor& gradient) {
  const Cublaslt& f = cublaslt();
  if (!f.found || !gradient.is_contiguous() || gradient.scalar_type() != at::kFloat) return false;
  const int64_t m = x_transposed.size(0);   // in
  const int64_t n = dy_transposed.size(0);  // out
  const int64_t k = x_transposed.size(1);   // rows
  const cudaDataType_t a_type = fp8_type(x_transposed);
  const cudaDataType_t b_type = fp8_type(dy_transposed);
  if (a_type == CUDA_R_8F_E5M2 && b_type == CUDA_R_8F_E5M2) return false;

  Descriptors d(f);
  const cublasOperation_t transposed = CUBLAS_OP_T;
  const cublasOperation_t plain = CUBLAS_OP_N;
  const void* a_scale = scale_x.data_ptr();
  const void* b_scale = scale_dy.data_ptr();
  if (f.matmul_desc_create(&d.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
      f.matmul_desc_set(d.operation, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof(transposed)) ||
      f.matmul_desc_set(d.operation, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof(plain)) ||
      f.matmul_desc_set(d.operation, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale)) ||
      f.matmul_desc_set(d.operation, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof(b_scale)) ||
      f.layout_create(&d.a, a_type, k, m, k) || f.layout_create(&d.b, b_type, k, n, k) ||
      f.layout_create(&d.c, CUDA_R_32F, m, n, m)) {
    return false;
  }
  static std::mutex mutex;
  static std::map<ShapeKey, std::pair<bool, cublasLtMatmulAlgo_t>> chosen;
  const ShapeKey key{m, n, k, static_cast<int>(a_type), static_cast<int>(b_type), gradient.get_device()};
  std::pair<bool, cublasLtMatmulAlgo_t> algorithm{false, {}};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto found = chosen.find(key);
    if (found != chosen.end()) {
      algorithm = found->second;
    } else {
      const size_t workspace = kWorkspaceBytes;
      cublasLtMatmulHeuristicResult_t result{};
      int count = 0;
      const bool asked = f.preference_create(&d.preference) == CUBLAS_STATUS_SUCCESS &&
                         f.preference_set(d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                          sizeof(workspace)) == CUBLAS_STATUS_SUCCESS &&
                         f.heuristic(at::cuda::getCurrentCUDABlasLtHandle(), d.operation, d.a, d.b, d.c, d.c,
                                     d.preference, 1, &result, &count) == CUBLAS_STATUS_SUCCESS;
      algorithm = {asked && count > 0, result.algo};
      chosen.emplace(key, algorithm);
    }
  }
  if (!algorithm.first) return false;
  const float one = 1.0f;
  const at::Tensor workspace = at::empty({static_cast<int64_t>(kWorkspaceBytes)}, gradient.options().dtype(at::kByte));
  return f.matmul(at::cuda::getCurrentCUDABlasLtHandle(), d.operation, &one, x_transposed.data_ptr(), d.a,
                  dy_transposed.data_ptr(), d.b, &one, gradient.data_ptr(), d.c, gradient.data_ptr(), d.c,
                  &algorithm.second, workspace.data_ptr(), kWorkspaceBytes,
                  at::cuda::getCurrentCUDAStream()) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace graphed::kernels
