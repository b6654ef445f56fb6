// capture/capture_state.h — the only process-wide mutable state graphed has (STYLE.md rule 13):
// whether a CUDA graph is being captured and whether a graph's warmup is running. Set only by the
// RAII scopes below (CudaGraph::capture, the engines' warmup passes, FullIterationGraph's eager
// calls). Read by code that must behave differently there: a local CudaGraphManager runs its unit as
// it is inside another capture or warmup (recording and replaying nothing), and model code with a
// host sync (which a graph cannot hold) refuses to run inside a capture with a clear error.
#pragma once

namespace graphed::capture {

/// True while a CaptureScope is alive on any thread.
bool is_graph_capturing();
/// True while a WarmupScope is alive on any thread.
bool is_graph_warmup();

/// Marks a capture for its lifetime. Nests.
class CaptureScope {
 public:
  CaptureScope();
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
};

/// Marks a warmup for its lifetime. Nests.
class WarmupScope {
 public:
  WarmupScope();
  ~WarmupScope();
  WarmupScope(const WarmupScope&) = delete;
  WarmupScope& operator=(const WarmupScope&) = delete;
};

}  // namespace graphed::capture
