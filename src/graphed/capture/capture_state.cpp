// capture/capture_state.cpp — see capture/capture_state.h. Counters, so scopes nest.
#include "graphed/capture/capture_state.h"

#include <atomic>

namespace graphed::capture {
namespace {
std::atomic<int> capturing{0};
std::atomic<int> warming_up{0};
std::atomic<int> probing_gradients{0};
std::atomic<int> eager_only{0};
}  // namespace

bool is_graph_capturing() { return capturing.load() > 0; }
bool is_graph_warmup() { return warming_up.load() > 0; }
bool is_gradient_probe() { return probing_gradients.load() > 0; }
bool is_eager_only() { return eager_only.load() > 0; }

CaptureScope::CaptureScope() { ++capturing; }
CaptureScope::~CaptureScope() { --capturing; }
WarmupScope::WarmupScope(WarmupKind kind) : kind_(kind) {
  ++warming_up;
  if (kind_ == WarmupKind::kGradientProbe) ++probing_gradients;
}
WarmupScope::~WarmupScope() {
  if (kind_ == WarmupKind::kGradientProbe) --probing_gradients;
  --warming_up;
}
EagerScope::EagerScope() { ++eager_only; }
EagerScope::~EagerScope() { --eager_only; }

}  // namespace graphed::capture
