// util/logging.cpp — see util/logging.h. The rank and debug channels are set once by cli/ at start.
#include "graphed/util/logging.h"

#include <atomic>
#include <iostream>
#include <mutex>
#include <set>

namespace graphed {
namespace {

std::atomic<int> current_rank{0};
std::mutex channels_mutex;

std::set<std::string>& channels() {
  static std::set<std::string> enabled;  // function-local: no static constructor
  return enabled;
}

}  // namespace

void set_log_rank(int rank) { current_rank = rank; }
int log_rank() { return current_rank; }

void log_info(const std::string& message) {
  if (current_rank == 0) std::cerr << message << '\n';
}

void log_warn(const std::string& message) {
  if (current_rank == 0) std::cerr << "warning: " << message << '\n';
}

void enable_debug_channel(const std::string& channel) {
  std::lock_guard<std::mutex> lock(channels_mutex);
  channels().insert(channel);
}

bool is_debug_channel_enabled(const std::string& channel) {
  std::lock_guard<std::mutex> lock(channels_mutex);
  return channels().count(channel) > 0 || channels().count("all") > 0;
}

void log_debug(const std::string& channel, const std::string& message) {
  std::cerr << "[debug " << channel << "] " << message << '\n';
}

}  // namespace graphed
