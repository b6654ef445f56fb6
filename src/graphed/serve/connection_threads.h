// serve/connection_threads.h — the HTTP server's threads. cpp-httplib hands every accepted connection to a task
// queue, and the connection holds a thread from its first byte until it closes (a stream, all the while its
// request runs). httplib's own pool starts a fixed number of threads at once; this one starts them as connections
// need them, up to a limit, so that a server sized for every request the engine loop can hold (running and queued)
// costs nothing until it is busy. Connections beyond the limit wait, accepted, for a thread that frees up; none is
// refused. Threads stay once started (an idle one costs its stack's touched pages).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace graphed::serve {

class ConnectionThreads final : public httplib::TaskQueue {
 public:
  /// `max_threads`: the most threads, at least 1.
  explicit ConnectionThreads(std::size_t max_threads);
  ~ConnectionThreads() override;
  ConnectionThreads(const ConnectionThreads&) = delete;
  ConnectionThreads& operator=(const ConnectionThreads&) = delete;

  /// Queues a connection's work; starts a thread when every started one is busy and the limit allows.
  void enqueue(std::function<void()> job) override;
  /// Runs what is queued, then stops and joins the threads (httplib calls it when listening ends).
  void shutdown() override;
  /// Threads started so far (shutdown does not reset it).
  std::size_t started() const;
  /// Started threads waiting for a job.
  std::size_t idle() const;

 private:
  void work();

  std::size_t max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  std::size_t started_ = 0;
  std::size_t idle_ = 0;  // threads waiting for a job
  bool stopping_ = false;
};

}  // namespace graphed::serve
