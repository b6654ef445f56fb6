// util/build_info.h — what this binary was built with: graphed version, LibTorch version, whether
// CUDA code was compiled in (GRAPHED_CUDA). Printed by `graphed --version` and the GPU check.
#pragma once

#include <string>

namespace graphed {

/// graphed's own version, e.g. "0.1.0".
std::string graphed_version();
/// The LibTorch version compiled against, e.g. "1.13.0" or "2.11.0".
std::string torch_version();
/// Whether this binary has the CUDA-graph code (the LibTorch found had CUDA).
bool built_with_cuda();
/// One line: "graphed 0.1.0 (LibTorch 2.11.0, CUDA graphs compiled in)".
std::string build_summary();

}  // namespace graphed
