// infer/speculator.cpp — see infer/speculator.h.
#include "graphed/infer/speculator.h"

#include <algorithm>
#include <cmath>

namespace graphed::infer {

Speculator::Speculator(SpeculativeDecoding config) : config_(config) {}

bool Speculator::speculates(const Request& request) const {
  return enabled() && request.speculation.allowed && request.generated() >= request.speculation.resume_at;
}

bool Speculator::worth_waiting(const Request& request) const {
  NgramLookup lookup = config_.lookup;
  lookup.tokens = 1;
  return !propose_by_lookup(request.tokens, lookup).empty();
}

int64_t Speculator::proposal_limit(const Request& request) const {
  const double recent = request.speculation.recent_accepted;
  if (recent < 0) return config_.tokens();
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(2 * recent)) + 1, 1, config_.tokens());
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
  if (proposed > 0) {
    const auto kept = static_cast<double>(accepted);
    state.recent_accepted = state.recent_accepted < 0 ? kept : 0.7 * state.recent_accepted + 0.3 * kept;
  }
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
