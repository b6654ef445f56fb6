// tests/ranks_on_threads.h — runs one body per rank on threads of this process and rethrows the first
// failure after all have ended: how the tensor-parallel tests play several ranks without processes.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace graphed::testing {

inline void run_ranks_on_threads(int64_t ranks, const std::function<void(int64_t rank)>& body) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> failures(static_cast<std::size_t>(ranks));
  for (int64_t rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        failures[static_cast<std::size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

}  // namespace graphed::testing
