// dist/rank_monitor.h — keeps a rank from waiting forever on one that died. A background thread beats
// a counter in the rendezvous store every second and watches the other ranks' counters and the
// shared failure note. When a rank fails it leaves the note ("rank 1: <its error>"); when a rank stops
// beating for the stall limit, or the store itself is gone (rank 0 hosted it), every other rank prints
// one line naming the rank and exits, instead of hanging in a collective that will never complete.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace graphed::dist {

class RankMonitor {
 public:
  /// store: a connection of the monitor's own. on_failure(message) runs on the monitor thread and must
  /// not return (it prints and exits the process).
  RankMonitor(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t world_size,
              std::chrono::milliseconds stall_limit, std::function<void(const std::string&)> on_failure);
  /// Stops the thread (it is joined).
  ~RankMonitor();

  /// Leaves the failure note for the other ranks (before this rank exits with an error).
  void report_failure(const std::string& message);
  /// The note another rank left ("rank 1: <its error>"), if any: the cause when a collective of this rank
  /// fails because that rank went away.
  std::optional<std::string> failure_of_another_rank();
  /// Marks this rank finished: a finished rank that stops beating is not a failure.
  void finish();
  /// Waits (up to the stall limit) until every rank is finished, so that the store's host leaves last.
  void wait_for_everyone();

 private:
  void watch();
  /// Whether a failure note is this rank's own ("rank <this rank>: ...").
  bool is_own_note(const std::string& note) const;

  c10::intrusive_ptr<c10d::Store> store_;
  int64_t rank_;
  int64_t world_size_;
  std::chrono::milliseconds stall_limit_;
  std::function<void(const std::string&)> on_failure_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace graphed::dist
