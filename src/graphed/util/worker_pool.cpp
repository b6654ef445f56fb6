// util/worker_pool.cpp — see util/worker_pool.h.
#include "graphed/util/worker_pool.h"

#include <algorithm>

namespace graphed {

WorkerPool::WorkerPool(int64_t workers) {
  for (int64_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_) thread.join();
}

int64_t WorkerPool::workers_for_this_machine(int64_t limit) {
  const auto cores = static_cast<int64_t>(std::thread::hardware_concurrency());
  return std::max<int64_t>(0, std::min(limit, cores - 2));
}

void WorkerPool::drain(std::unique_lock<std::mutex>& lock) {
  while (item_ != nullptr && next_ < count_) {
    const int64_t index = next_++;
    const auto* item = item_;
    ++running_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*item)(index);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    --running_;
    if (error && !error_) error_ = error;
  }
  if (running_ == 0) done_.notify_all();
}

void WorkerPool::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  int64_t seen = 0;
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || (item_ != nullptr && batch_ != seen); });
    if (stopping_) return;
    seen = batch_;
    drain(lock);
  }
}

void WorkerPool::run(int64_t count, const std::function<void(int64_t)>& item) {
  if (count <= 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  item_ = &item;
  count_ = count;
  next_ = 0;
  error_ = nullptr;
  ++batch_;
  if (!threads_.empty() && count > 1) wake_.notify_all();
  drain(lock);
  done_.wait(lock, [&] { return next_ >= count_ && running_ == 0; });
  item_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace graphed
