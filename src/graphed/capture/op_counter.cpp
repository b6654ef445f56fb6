// capture/op_counter.cpp — see capture/op_counter.h.
#include "graphed/capture/op_counter.h"

#include <ATen/record_function.h>

#include <atomic>

namespace graphed::capture {
namespace {

std::atomic<int64_t> dispatched{0};  // the callback is a plain function pointer, so it counts here

std::unique_ptr<at::ObserverContext> count_one(const at::RecordFunction&) {
  dispatched.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

}  // namespace

int64_t count_dispatched_ops(const std::function<void()>& region) {
  dispatched = 0;
  const auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(count_one).scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  try {
    region();
  } catch (...) {
    at::removeCallback(handle);
    throw;
  }
  at::removeCallback(handle);
  return dispatched.load();
}

}  // namespace graphed::capture
