// infer/speculation_governor.cpp — see infer/speculation_governor.h.
#include "graphed/infer/speculation_governor.h"

#include <algorithm>
#include <cmath>

namespace graphed::infer {

void SpeculationGovernor::record(double seconds, int64_t tokens, int64_t running, bool decode) {
  waiting_seconds_ += seconds;
  if (tokens <= 0) return;
  seconds = waiting_seconds_;
  waiting_seconds_ = 0;
  if (!decode || running <= 0 || seconds <= 0) return;
  ++total_steps_;
  if (!speculating_) ++plain_steps_;
  if (++steps_ > length_ - kMeasured) {
    seconds_ += seconds * static_cast<double>(running);
    tokens_ += static_cast<double>(tokens);
    running_ += static_cast<double>(running);
    ++measured_;
  }
  if (steps_ >= length_) end_phase();
}

void SpeculationGovernor::end_phase() {
  (speculating_ ? speculative_rate_ : plain_rate_) = tokens_ / seconds_;
  (speculating_ ? speculative_load_ : plain_load_) = running_ / static_cast<double>(measured_);
  if (!probing_) {  // a stretch ended: probe the other side
    stretch_speculating_ = speculating_;
    speculating_ = !speculating_;
    probing_ = true;
    length_ = kSkipped + kMeasured;
  } else {  // a probe ended: the side that drew more runs a stretch
    const bool same_load =
        std::abs(speculative_load_ - plain_load_) <= kSameLoad * std::max(speculative_load_, plain_load_);
    const bool speculate = same_load ? speculative_rate_ >= plain_rate_ : stretch_speculating_;
    const double margin = speculate ? speculative_rate_ / plain_rate_ : plain_rate_ / speculative_rate_;
    if (!same_load || margin < kWideMargin) {
      stretch_ = kShortStretch;
    } else {
      const bool again = wide_ && speculate == stretch_speculating_;
      stretch_ = again ? std::min(2 * stretch_, kLongestStretch) : kStretch;
    }
    wide_ = same_load && margin >= kWideMargin;
    speculating_ = speculate;
    probing_ = false;
    length_ = stretch_;
  }
  steps_ = 0;
  seconds_ = 0;
  tokens_ = 0;
  running_ = 0;
  measured_ = 0;
}

}  // namespace graphed::infer
