// util/worker_pool.h — WorkerPool: a few threads that run the items of one batch of independent work at a time
// (the serving engine's token masks, one request each), so that a caller spreads a step's host work over the
// machine's cores without starting threads per step. run() returns when every item is done; an item's exception
// is rethrown there (the first one).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace graphed {

class WorkerPool {
 public:
  /// `workers` threads beside the caller's (0: the caller runs every item itself).
  explicit WorkerPool(int64_t workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  /// Calls item(i) for i in [0, count), on the workers and the calling thread, and waits for all of them.
  void run(int64_t count, const std::function<void(int64_t)>& item);
  int64_t workers() const { return static_cast<int64_t>(threads_.size()); }

  /// Workers for a machine's cores: all but two (the caller's thread and the device's feeder), at most `limit`.
  static int64_t workers_for_this_machine(int64_t limit);

 private:
  void work();
  /// Takes and runs items of the current batch until none is left.
  void drain(std::unique_lock<std::mutex>& lock);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t)>* item_ = nullptr;  // the current batch, null between batches
  int64_t count_ = 0;
  int64_t next_ = 0;
  int64_t running_ = 0;
  int64_t batch_ = 0;  // counts batches, so a worker joins each one once
  std::exception_ptr error_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace graphed
