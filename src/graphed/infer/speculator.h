// infer/speculator.h — which requests speculate and what they propose (speculative decoding's policy, torch-free):
// a request whose options allow it (infer/request.h SpeculationState) proposes tokens by prompt lookup
// (infer/speculation.h) at each step, and the step verifies them. When its proposals keep failing (random text),
// it pauses for a while and decodes plainly, with async scheduling, so that speculation does not slow it down; the
// pause doubles while failures go on, and a kept proposal ends it. A request proposes about as many tokens as it
// kept lately, and waits for its tokens in flight only where its text repeats.
#pragma once

#include <cstdint>
#include <vector>

#include "graphed/infer/request.h"
#include "graphed/infer/speculation.h"

namespace graphed::infer {

class Speculator {
 public:
  /// Steps in a row that keep no proposed token before a request pauses.
  static constexpr int64_t kMissesBeforePause = 3;
  /// The first pause and the longest, in drawn tokens.
  static constexpr int64_t kFirstPause = 16;
  static constexpr int64_t kLongestPause = 256;

  explicit Speculator(SpeculativeDecoding config = {});

  const SpeculativeDecoding& config() const { return config_; }
  bool enabled() const { return config_.enabled(); }
  /// Whether `request` verifies proposals at its next decode step (then it waits for its tokens in flight).
  bool speculates(const Request& request) const;
  /// Whether a speculating request with a token in flight should wait for it (a step without it) to propose next:
  /// its tokens so far end in an n-gram that occurred before. Otherwise it decodes on, a step ahead, as without
  /// speculation: text that does not repeat costs no step.
  bool worth_waiting(const Request& request) const;
  /// The most tokens `request` proposes next: all of num_speculative_tokens at first, then about twice what its
  /// verifications kept lately, plus one (rows the step would spend on proposals it refuses cost every request).
  int64_t proposal_limit(const Request& request) const;
  /// Up to `limit` tokens proposed to follow `request`'s tokens (every one of them read).
  std::vector<int64_t> propose(const Request& request, int64_t limit) const;
  /// Moves a request's state on after a step verified `proposed` tokens (0: it had none) and kept `accepted`.
  void record(Request& request, int64_t proposed, int64_t accepted) const;

 private:
  SpeculativeDecoding config_;
};

}  // namespace graphed::infer
