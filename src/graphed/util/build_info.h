// util/build_info.h — what this binary was built with: graphed version, LibTorch version, whether
// CUDA code was compiled in (GRAPHED_CUDA). Printed by `graphed --version` and the GPU check.
#pragma once

#include <optional>
#include <string>

namespace graphed {

/// graphed's own version, e.g. "0.1.0".
std::string graphed_version();
/// The LibTorch version compiled against, e.g. "1.13.0" or "2.11.0".
std::string torch_version();
/// Whether this binary has the CUDA-graph code (the LibTorch found had CUDA).
bool built_with_cuda();
/// The path of the reference (netlib) BLAS when this process loaded it instead of an optimized one
/// (Debian's default for libtorch-dev, ~6x slower CPU training); nullopt otherwise. Reads /proc/self/maps.
std::optional<std::string> reference_blas_loaded();
/// One line: "graphed 0.1.0 (LibTorch 2.11.0, CUDA graphs compiled in)".
std::string build_summary();

}  // namespace graphed
