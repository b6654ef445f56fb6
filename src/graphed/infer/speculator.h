// infer/speculator.h — which requests speculate and what they propose (speculative decoding's policy, torch-free):
// a request whose options allow it (infer/request.h SpeculationState) proposes tokens at each step, by prompt lookup
// or from a draft model (infer/speculation.h Proposer), and the step verifies them. When its proposals keep failing
// (random text), it pauses for a while and decodes plainly, with async scheduling, so that speculation does not slow it
// down; the pause doubles while failures go on, and a kept proposal ends it. A request proposes about as many tokens as
// it kept lately, and waits for its tokens in flight only where its text repeats.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graphed/infer/request.h"
#include "graphed/infer/speculation.h"
#include "graphed/infer/speculation_governor.h"

namespace graphed::infer {

class Speculator {
 public:
  /// Steps in a row that keep no proposed token before a request pauses.
  static constexpr int64_t kMissesBeforePause = 3;
  /// The first pause and the longest, in drawn tokens.
  static constexpr int64_t kFirstPause = 16;
  static constexpr int64_t kLongestPause = 256;

  /// A draft model's speculation brings its proposer (config.draft, not null); prompt lookup makes its own.
  explicit Speculator(SpeculativeDecoding config = {});

  const SpeculativeDecoding& config() const { return config_; }
  bool enabled() const { return config_.enabled(); }
  /// Whether `request` verifies proposals at its next decode step (then it waits for its tokens in flight): its
  /// options allow it, it is not pausing, and speculation pays at the engine's load (the governor).
  bool speculates(const Request& request) const;
  /// Measures one step() call for the governor (SpeculationGovernor::record).
  void record_step(double seconds, int64_t tokens, int64_t running, bool decode) {
    if (enabled() && config_.governed) governor_.record(seconds, tokens, running, decode);
  }
  const SpeculationGovernor& governor() const { return governor_; }
  /// Whether a speculating request with a token in flight should wait for it (a step without it) to propose next:
  /// by prompt lookup, where its tokens so far end in an n-gram that occurred before (otherwise it decodes on, a
  /// step ahead, as without speculation: text that does not repeat costs no step); with a draft model, always.
  bool worth_waiting(const Request& request) const { return proposer_->worth_waiting(request); }
  /// The most tokens `request` proposes next: all of num_speculative_tokens at first, then about twice what its
  /// verifications kept lately, plus one (rows the step would spend on proposals it refuses cost every request).
  int64_t proposal_limit(const Request& request) const;
  /// Up to each ask's limit of tokens to follow its request's tokens (every one of them read), all at once.
  std::vector<std::vector<int64_t>> propose(const std::vector<Proposer::Ask>& asks) const {
    return proposer_->propose(asks);
  }
  /// Moves a request's state on after a step verified `proposed` tokens (0: it had none) and kept `accepted`.
  void record(Request& request, int64_t proposed, int64_t accepted) const;

 private:
  SpeculativeDecoding config_;
  std::shared_ptr<Proposer> proposer_;  // the draft's, or prompt lookup's
  SpeculationGovernor governor_;
};

}  // namespace graphed::infer
