// tests/ranks_on_threads.h — runs one body per rank on threads of this process and rethrows the first
// failure after all have ended (every rank's printed): how the tensor-parallel tests play several ranks without
// processes.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <iostream>
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
  // Every rank's failure is printed: the first one rethrown is often a rank whose peer stopped first.
  std::exception_ptr first;
  for (std::size_t rank = 0; rank < failures.size(); ++rank) {
    if (!failures[rank]) continue;
    if (!first) first = failures[rank];
    try {
      std::rethrow_exception(failures[rank]);
    } catch (const std::exception& error) {
      std::cerr << "rank " << rank << " failed: " << error.what() << '\n';
    } catch (...) {
      std::cerr << "rank " << rank << " failed\n";
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace graphed::testing
