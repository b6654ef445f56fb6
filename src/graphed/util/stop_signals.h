// util/stop_signals.h — lets a long run stop at its next safe point on SIGINT (Ctrl-C) or SIGTERM
// (what schedulers and torchrun send) instead of dying where it stands, as Megatron's
// --exit-signal-handler does: the first signal only sets a flag the loop reads; a second one ends the
// process at once, as a user pressing Ctrl-C twice expects.
#pragma once

#include <string>

namespace graphed {

class StopSignals {
 public:
  /// Installs handlers for SIGINT and SIGTERM until destruction (the earlier handlers come back then).
  /// announce: the first signal writes `announcement` to stderr (rank 0 of a launch says it, not every
  /// rank). Only one StopSignals may exist at a time.
  StopSignals(bool announce, std::string announcement);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// Whether a signal came since installation.
  bool requested() const;
  /// "SIGINT" or "SIGTERM": the first signal that came (empty when none came).
  std::string signal_name() const;
  /// The exit status a process killed by that signal would have had: 130 for SIGINT, 143 for SIGTERM.
  static int exit_status_of_second_signal(int signal_number);
};

}  // namespace graphed
