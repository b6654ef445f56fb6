// capture/capture_diagnostics.h — turns a failed CUDA-graph capture into a CaptureError that names
// the cause and the fix (the seed-003 error table): a host sync inside the region (.item(), .cpu(),
// printing, a blocking copy), an invalidated capture, a side stream not joined back, implicit use of
// the legacy default stream, an unregistered or misused RNG generator. Pure string analysis of the
// error LibTorch/CUDA raised, so it is tested on the CPU.
#pragma once

#include <string>

#include "graphed/util/error.h"

namespace graphed::capture {

/// The diagnosis of a capture of `region` (e.g. "the full-iteration training step") that failed with
/// `error_text`. The cause says what happened and adds that the process's CUDA RNG is now unusable.
CaptureError diagnose_capture_failure(const std::string& region, const std::string& error_text);

}  // namespace graphed::capture
