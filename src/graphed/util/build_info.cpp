// util/build_info.cpp — see util/build_info.h. Needs only <torch/version.h>, not the frontend.
#include "graphed/util/build_info.h"

#include "graphed/util/file_system.h"

#include <torch/version.h>

#ifndef GRAPHED_VERSION
#define GRAPHED_VERSION "unknown"
#endif

namespace graphed {

std::string graphed_version() { return GRAPHED_VERSION; }

std::string torch_version() { return TORCH_VERSION; }

bool built_with_cuda() { return GRAPHED_CUDA != 0; }

std::optional<std::string> reference_blas_loaded() {
  std::string maps;
  if (read_file("/proc/self/maps", maps) != 0) return std::nullopt;
  const std::size_t at = maps.find("/blas/libblas.so");  // Debian's netlib BLAS; OpenBLAS lives in openblas*/
  if (at == std::string::npos) return std::nullopt;
  const std::size_t begin = maps.rfind(' ', at) + 1;
  return maps.substr(begin, maps.find('\n', at) - begin);
}

std::string build_summary() {
  return "graphed " + graphed_version() + " (LibTorch " + torch_version() + ", " +
         (built_with_cuda() ? "CUDA graphs compiled in" : "CPU only: GRAPHED_CUDA=0") + ")";
}

}  // namespace graphed
