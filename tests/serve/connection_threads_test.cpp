// tests/serve/connection_threads_test.cpp — the HTTP server's threads: none before a connection comes, one more
// only while every started one is busy, never past the limit (a job beyond it waits and then runs), and shutdown
// runs what is queued before it joins.
#include "graphed/serve/connection_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace graphed::serve {
namespace {

using namespace std::chrono_literals;

/// Jobs that hold their thread until released.
class Gate {
 public:
  void pass() {
    std::unique_lock<std::mutex> lock(mutex_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  /// Waits (at most 20 s) until `count` jobs are held at the gate.
  bool holds(int count) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, 20s, [&] { return waiting_ >= count; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool open_ = false;
};

TEST(ConnectionThreadsTest, StartsThreadsAsJobsNeedThemUpToTheLimit) {
  ConnectionThreads threads(3);
  EXPECT_EQ(threads.started(), 0u);
  Gate gate;
  std::atomic<int> done{0};
  for (int i = 0; i < 5; ++i) {
    threads.enqueue([&] {
      gate.pass();
      ++done;
    });
  }
  ASSERT_TRUE(gate.holds(3));
  EXPECT_EQ(threads.started(), 3u);  // the other two wait for a thread
  EXPECT_EQ(done.load(), 0);
  gate.open();
  threads.shutdown();
  EXPECT_EQ(done.load(), 5);
  EXPECT_EQ(threads.started(), 3u);
}

TEST(ConnectionThreadsTest, AnIdleThreadTakesTheNextJobWithoutANewOne) {
  ConnectionThreads threads(8);
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> ran{false};
    threads.enqueue([&] { ran = true; });
    // The job ran and its thread waits again (at most 20 s).
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!(ran && threads.idle() == threads.started()) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    ASSERT_TRUE(ran) << "round " << round;
  }
  EXPECT_EQ(threads.started(), 1u);
  threads.shutdown();
}

}  // namespace
}  // namespace graphed::serve
