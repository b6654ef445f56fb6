// util/build_info.cpp — see util/build_info.h. Needs only <torch/version.h>, not the frontend.
#include "graphed/util/build_info.h"

#include <torch/version.h>

#ifndef GRAPHED_VERSION
#define GRAPHED_VERSION "unknown"
#endif

namespace graphed {

std::string graphed_version() { return GRAPHED_VERSION; }

std::string torch_version() { return TORCH_VERSION; }

bool built_with_cuda() { return GRAPHED_CUDA != 0; }

std::string build_summary() {
  return "graphed " + graphed_version() + " (LibTorch " + torch_version() + ", " +
         (built_with_cuda() ? "CUDA graphs compiled in" : "CPU only: GRAPHED_CUDA=0") + ")";
}

}  // namespace graphed
