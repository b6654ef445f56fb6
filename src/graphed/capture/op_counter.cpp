// capture/op_counter.cpp — see capture/op_counter.h.
#include "graphed/capture/op_counter.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "graphed/util/logging.h"

namespace graphed::capture {
namespace {

std::atomic<int64_t> dispatched{0};  // the callback is a plain function pointer, so it counts here
std::atomic<bool> by_name{false};    // --debug ops: also count per operator name
std::mutex names_mutex;
std::map<std::string, int64_t> names;

std::unique_ptr<at::ObserverContext> count_one(const at::RecordFunction& function) {
  dispatched.fetch_add(1, std::memory_order_relaxed);
  if (by_name.load(std::memory_order_relaxed)) {
    const std::lock_guard<std::mutex> lock(names_mutex);
    ++names[function.name()];
  }
  return nullptr;
}

/// The 25 most frequent operators, for --debug ops.
std::string most_frequent() {
  std::vector<std::pair<int64_t, std::string>> sorted;
  for (const auto& [name, count] : names) sorted.emplace_back(count, name);
  std::sort(sorted.rbegin(), sorted.rend());
  std::ostringstream out;
  for (std::size_t i = 0; i < sorted.size() && i < 25; ++i)
    out << (i ? ", " : "") << sorted[i].second << " " << sorted[i].first;
  return out.str();
}

}  // namespace

int64_t count_dispatched_ops(const std::function<void()>& region) {
  dispatched = 0;
  names.clear();
  by_name = is_debug_channel_enabled("ops");
  const auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(count_one).scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  try {
    region();
  } catch (...) {
    at::removeCallback(handle);
    throw;
  }
  at::removeCallback(handle);
  GRAPHED_DEBUG("ops", dispatched.load() << " operators: " << most_frequent());
  return dispatched.load();
}

}  // namespace graphed::capture
