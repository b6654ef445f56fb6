// infer/speculator.cpp — see infer/speculator.h.
#include "graphed/infer/speculator.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "graphed/util/error.h"

namespace graphed::infer {

Speculator::Speculator(SpeculativeDecoding config)
    : config_(std::move(config)),
      proposer_(config_.method == SpeculativeDecoding::Method::kDraftModel
                    ? config_.draft
                    : std::make_shared<LookupProposer>(config_.lookup)) {
  GRAPHED_INTERNAL_ASSERT(proposer_ != nullptr, "a draft model's speculation without its proposer");
}

bool Speculator::speculates(const Request& request) const {
  return enabled() && (!config_.governed || governor_.allows()) && request.speculation.allowed &&
         request.generated() >= request.speculation.resume_at;
}

int64_t Speculator::proposal_limit(const Request& request) const {
  const double recent = request.speculation.recent_accepted;
  if (recent < 0) return config_.tokens();
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(2 * recent)) + 1, 1, config_.tokens());
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
