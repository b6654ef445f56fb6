// infer/speculation_governor.h — whether speculation pays at the engine's present load, measured (torch-free). A
// verification's rows, a draft model's steps, and under async scheduling the step a verifying request sits out, cost
// more as the batch grows, and at some load a step without proposals draws more tokens a second. The governor takes
// turns: a few steps with speculation and a few without, each measured in tokens per second per running request,
// then a longer stretch of whichever drew more, then it measures again (the load changes). Requests' own pauses
// (infer/speculator.h) work within it.
#pragma once

#include <cstdint>

namespace graphed::infer {

class SpeculationGovernor {
 public:
  /// A probe: steps skipped while the last side's steps drain, then steps measured. A stretch runs the side that
  /// drew more: kShortStretch steps after a narrow win (or measurements at different loads), kStretch after a wide
  /// one, doubled while the same side keeps winning widely, to kLongestStretch; its last kMeasured steps measure its
  /// side again. The first stretch speculates for kShortStretch steps.
  static constexpr int64_t kSkipped = 2;
  static constexpr int64_t kMeasured = 6;
  static constexpr int64_t kShortStretch = 16;
  static constexpr int64_t kStretch = 64;
  static constexpr int64_t kLongestStretch = 512;
  /// A side that draws this many times the other's tokens a second wins by a wide margin.
  static constexpr double kWideMargin = 1.3;
  /// Two measurements compare only at about the same load: their mean running requests within this fraction of each
  /// other (a smaller batch draws more tokens a second per request, as a run's last requests finish). Otherwise the
  /// last stretch's side runs again.
  static constexpr double kSameLoad = 0.15;

  /// Whether the next step may speculate.
  bool allows() const { return speculating_; }
  /// One step() call of `seconds`: it handed out `tokens` tokens with `running` requests in the engine, from a step
  /// that computed no prompt token (`decode`: a step computing prompts draws few tokens for its time, and is not
  /// measured). The time of calls that handed out nothing (a step launched, the one before it still on the device;
  /// a draft model's proposals) goes to the next call that does.
  void record(double seconds, int64_t tokens, int64_t running, bool decode);

  /// The latest measured tokens per second per running request, with and without speculation (0: not measured).
  double speculative_rate() const { return speculative_rate_; }
  double plain_rate() const { return plain_rate_; }
  /// Steps recorded so far, and of them those run without speculation.
  int64_t steps() const { return total_steps_; }
  int64_t plain_steps() const { return plain_steps_; }

 private:
  /// Ends a stretch (then the other side is probed) or a probe (then the side that drew more runs a stretch).
  void end_phase();

  bool probing_ = false;
  bool speculating_ = true;          // the side running now; the first stretch is only a measurement
  bool stretch_speculating_ = true;  // the last stretch's side
  bool wide_ = false;                // the last stretch's side had won widely
  int64_t length_ = kShortStretch;   // of this phase, in steps
  int64_t stretch_ = kStretch;
  int64_t steps_ = 0;           // in this phase
  double waiting_seconds_ = 0;  // of calls since the last that handed out tokens
  double seconds_ = 0;          // measured in this phase, by running requests
  double tokens_ = 0;
  double running_ = 0;  // summed over the measured steps
  int64_t measured_ = 0;
  double speculative_load_ = 0;  // mean running requests of each side's latest measurement
  double plain_load_ = 0;
  double speculative_rate_ = 0;
  double plain_rate_ = 0;
  int64_t total_steps_ = 0;
  int64_t plain_steps_ = 0;
};

}  // namespace graphed::infer
