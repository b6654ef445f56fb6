// kernels/accumulation_listeners.cpp — see kernels/accumulation_listeners.h. The listeners live in one
// table behind a mutex; each call runs on a copy, so a listener may launch work (a collective) freely.
#include "graphed/kernels/accumulation_listeners.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace graphed::kernels {
namespace {

struct Listeners {
  std::mutex mutex;
  std::map<int64_t, AccumulationListener> by_id;
  int64_t next_id = 0;
};

Listeners& listeners() {
  static Listeners table;
  return table;
}

}  // namespace

int64_t add_accumulation_listener(AccumulationListener listener) {
  Listeners& table = listeners();
  const std::lock_guard<std::mutex> lock(table.mutex);
  const int64_t id = table.next_id++;
  table.by_id.emplace(id, std::move(listener));
  return id;
}

void remove_accumulation_listener(int64_t id) {
  Listeners& table = listeners();
  const std::lock_guard<std::mutex> lock(table.mutex);
  table.by_id.erase(id);
}

void gradient_accumulated(const at::Tensor& parameter) {
  std::vector<AccumulationListener> current;
  {
    Listeners& table = listeners();
    const std::lock_guard<std::mutex> lock(table.mutex);
    if (table.by_id.empty()) return;
    for (const auto& [id, listener] : table.by_id) current.push_back(listener);
  }
  for (const AccumulationListener& listener : current) listener(parameter);
}

}  // namespace graphed::kernels
