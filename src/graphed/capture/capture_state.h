// capture/capture_state.h — the only process-wide mutable state graphed has (STYLE.md rule 13):
// whether a CUDA graph is being captured, whether a graph's warmup is running, and whether graphed
// units must run eagerly (work outside the training loop, such as sampling text). Set only by the
// RAII scopes below (CudaGraph::capture, the engines' warmup passes, FullIterationGraph's eager
// calls, the trainer's samples). Read by code that must behave differently there: a local CudaGraphManager runs its
// unit as it is inside another capture or warmup (recording and replaying nothing), and model code with a host sync
// (which a graph cannot hold) refuses to run inside a capture with a clear error.
#pragma once

namespace graphed::capture {

/// True while a CaptureScope is alive on any thread.
bool is_graph_capturing();
/// True while a WarmupScope is alive on any thread.
bool is_graph_warmup();
/// True while a WarmupScope of kind kGradientProbe is alive on any thread: a backward that only looks at
/// the gradients (autograd::grad) and must leave every parameter's .grad alone.
bool is_gradient_probe();

/// Marks a capture for its lifetime. Nests.
class CaptureScope {
 public:
  CaptureScope();
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
};

/// True while an EagerScope is alive on any thread.
bool is_eager_only();

/// Runs every graphed unit eagerly for its lifetime: no graph is replayed, recorded or captured
/// (a sample's one-row, growing-window calls would otherwise each capture a forward-only graph). Nests.
class EagerScope {
 public:
  EagerScope();
  ~EagerScope();
  EagerScope(const EagerScope&) = delete;
  EagerScope& operator=(const EagerScope&) = delete;
};

/// What a warmup's backward is: an ordinary iteration (a full-iteration graph's eager first steps, whose
/// gradients accumulate into .grad as any step's) or a probe of the gradients (the per-layer engines'
/// warmups, through autograd::grad).
enum class WarmupKind { kOrdinaryIteration, kGradientProbe };

/// Marks a warmup for its lifetime. Nests.
class WarmupScope {
 public:
  explicit WarmupScope(WarmupKind kind);
  ~WarmupScope();
  WarmupScope(const WarmupScope&) = delete;
  WarmupScope& operator=(const WarmupScope&) = delete;

 private:
  WarmupKind kind_;
};

}  // namespace graphed::capture
