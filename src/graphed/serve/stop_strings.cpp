// serve/stop_strings.cpp — see serve/stop_strings.h.
#include "graphed/serve/stop_strings.h"

#include <algorithm>
#include <utility>

namespace graphed::serve {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}

StopStrings::Piece StopStrings::push(const std::string& text) {
  if (stopped_) return {"", true};
  pending_ += text;
  std::size_t earliest = std::string::npos;
  for (const auto& stop : stops_) earliest = std::min(earliest, pending_.find(stop));
  if (earliest != std::string::npos) {
    stopped_ = true;
    Piece piece{pending_.substr(0, earliest), true};
    pending_.clear();
    return piece;
  }
  const std::size_t keep = held_tail();
  Piece piece{pending_.substr(0, pending_.size() - keep), false};
  pending_.erase(0, pending_.size() - keep);
  return piece;
}

std::string StopStrings::finish() {
  std::string rest = stopped_ ? std::string() : std::move(pending_);
  pending_.clear();
  return rest;
}

std::size_t StopStrings::held_tail() const {
  std::size_t longest = 0;
  for (const auto& stop : stops_) {
    const std::size_t most = std::min(stop.size() - 1, pending_.size());
    for (std::size_t length = most; length > longest; --length) {
      if (pending_.compare(pending_.size() - length, length, stop, 0, length) == 0) {
        longest = length;
        break;
      }
    }
  }
  return longest;
}

}  // namespace graphed::serve
