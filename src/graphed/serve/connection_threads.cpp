// serve/connection_threads.cpp — see serve/connection_threads.h. A thread is started when the queued jobs
// outnumber the idle threads (a woken thread may not have taken its job yet, so idle threads alone do not say a
// job will be picked up). httplib calls enqueue() and shutdown() from its listening thread only.
#include "graphed/serve/connection_threads.h"

#include <algorithm>
#include <string>
#include <system_error>
#include <utility>

#include "graphed/util/logging.h"

namespace graphed::serve {

ConnectionThreads::ConnectionThreads(std::size_t max_threads) : max_threads_(std::max<std::size_t>(max_threads, 1)) {}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
    if (jobs_.size() > idle_ && started_ < max_threads_) {
      try {
        threads_.emplace_back([this] { work(); });
        ++started_;
      } catch (const std::system_error& error) {
        // Out of threads (ulimit -u, memory): the job waits for a started thread; with none, nothing would run it.
        if (threads_.empty()) throw;
        static std::once_flag said;
        std::call_once(said, [&] {
          log_warn("cannot start another HTTP thread (" + std::to_string(threads_.size()) +
                   " running: " + error.what() +
                   "); connections wait for a free one; fix: raise the process's thread limit "
                   "(ulimit -u) or lower --http-threads");
        });
      }
    }
  }
  ready_.notify_one();
}

void ConnectionThreads::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    threads.swap(threads_);
  }
  ready_.notify_all();
  for (auto& thread : threads) thread.join();
}

std::size_t ConnectionThreads::started() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return started_;
}

std::size_t ConnectionThreads::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_;
}

void ConnectionThreads::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++idle_;
      ready_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping, and nothing left to run
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace graphed::serve
