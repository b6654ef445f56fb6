// train/event_log.cpp — see train/event_log.h.
#include "graphed/train/event_log.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace graphed::train {

EventLog::EventLog(std::ostream& out, LogFormat format)
    : out_(out), format_(format), prints_to_terminal_(&out == &std::cout && ::isatty(::fileno(stdout)) != 0) {}

void EventLog::print(const std::string& kind, const nlohmann::json& fields, const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (format_ == LogFormat::kText) {
    out_ << line << std::endl;
    return;
  }
  nlohmann::ordered_json object;  // "event" first, then the fields
  object["event"] = kind;
  for (const auto& [key, value] : fields.items()) object[key] = value;
  // Text from a corpus may hold bytes that are not UTF-8: replaced, so that the line stays valid JSON.
  out_ << object.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << std::endl;
}

void EventLog::note(const std::string& message) {
  if (format_ == LogFormat::kText) {
    print("note", {}, "note: " + message);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  std::cerr << "note: " << message << std::endl;  // standard output holds only the JSON events
}

}  // namespace graphed::train
