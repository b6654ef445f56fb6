// infer/speculator.cpp — see infer/speculator.h.
#include "graphed/infer/speculator.h"

#include <algorithm>

namespace graphed::infer {

Speculator::Speculator(SpeculativeDecoding config) : config_(config) {}

bool Speculator::speculates(const Request& request) const {
  return enabled() && request.speculation.allowed && request.generated() >= request.speculation.resume_at;
}

std::vector<int64_t> Speculator::propose(const Request& request, int64_t limit) const {
  NgramLookup lookup = config_.lookup;
  lookup.tokens = std::min(lookup.tokens, limit);
  if (lookup.tokens <= 0) return {};
  return propose_by_lookup(request.tokens, lookup);
}

void Speculator::record(Request& request, int64_t proposed, int64_t accepted) const {
  SpeculationState& state = request.speculation;
  state.proposed += proposed;
  state.accepted += accepted;
  if (accepted > 0) {
    state.misses = 0;
    state.pause = 0;
    return;
  }
  if (++state.misses < kMissesBeforePause) return;
  state.pause = state.pause == 0 ? kFirstPause : std::min(2 * state.pause, kLongestPause);
  state.resume_at = request.generated() + state.pause;
  state.misses = 0;
}

}  // namespace graphed::infer
