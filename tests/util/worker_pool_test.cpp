// tests/util/worker_pool_test.cpp — WorkerPool runs every item of a batch exactly once, batch after batch, with and
// without workers, and hands an item's exception to run()'s caller, then serves the next batch.
#include "graphed/util/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace graphed {
namespace {

TEST(WorkerPool, RunsEveryItemOnceInEveryBatch) {
  for (const int64_t workers : {0, 1, 3}) {
    WorkerPool pool(workers);
    for (const int64_t count : {0, 1, 2, 7, 100}) {
      std::vector<std::atomic<int>> calls(static_cast<std::size_t>(count));
      pool.run(count, [&](int64_t index) { calls[static_cast<std::size_t>(index)].fetch_add(1); });
      for (int64_t i = 0; i < count; ++i) EXPECT_EQ(calls[static_cast<std::size_t>(i)].load(), 1) << workers;
    }
  }
}

TEST(WorkerPool, AnItemsExceptionReachesTheCallerAndThePoolGoesOn) {
  WorkerPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.run(20,
                        [&](int64_t index) {
                          ran.fetch_add(1);
                          if (index == 5) throw std::runtime_error("item 5");
                        }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 20);  // the other items still ran
  std::atomic<int> after{0};
  pool.run(10, [&](int64_t) { after.fetch_add(1); });
  EXPECT_EQ(after.load(), 10);
}

}  // namespace
}  // namespace graphed
