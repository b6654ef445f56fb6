// train/event_log.h — what a training run tells its user, one event at a time (the data and model,
// each log interval, captures, checkpoints, validation losses, samples, heartbeats, a stop, the
// summary), printed one way chosen once by the command: a line of text for a person, or one JSON
// object per line for a program (`graphed train --json`). Safe to call from several threads.
#pragma once

#include <mutex>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace graphed::train {

enum class LogFormat { kText, kJson };

class EventLog {
 public:
  EventLog(std::ostream& out, LogFormat format);

  /// Prints one event: `line` as text, or {"event": kind, ...fields} as one line of JSON.
  void print(const std::string& kind, const nlohmann::json& fields, const std::string& line);
  /// A note for the person at the terminal: "note: ..." as a line of text, and with JSON on stderr
  /// (standard output then holds only the JSON events).
  void note(const std::string& message);

  LogFormat format() const { return format_; }
  /// Whether it prints to a terminal (std::cout on a TTY): progress heartbeats stay out of it then.
  bool prints_to_terminal() const { return prints_to_terminal_; }

 private:
  std::ostream& out_;
  const LogFormat format_;
  const bool prints_to_terminal_;
  std::mutex mutex_;
};

}  // namespace graphed::train
