// tests/model/thread_collectives.h — model::TensorCollectives for ranks played by threads of one process:
// each collective waits for every rank (at most 20 s, so a mismatched collective fails instead of hanging),
// then combines their tensors in rank order. on_ranks runs one body per rank.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "graphed/model/tensor_parallel.h"
#include "ranks_on_threads.h"

namespace graphed::testing {

/// The ranks' shared meeting point: a collective deposits every rank's tensor, then each rank combines
/// them in rank order. Waits at most 20 s, so a mismatched collective fails instead of hanging.
class Rendezvous {
 public:
  explicit Rendezvous(int64_t size) : size_(size), deposits_(static_cast<std::size_t>(size)) {}

  std::vector<at::Tensor> exchange(int64_t rank, const at::Tensor& tensor) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t round = round_;
    deposits_[static_cast<std::size_t>(rank)] = tensor.clone();
    if (++arrived_ == size_) {
      arrived_ = 0;
      taken_ = 0;
      result_ = deposits_;
      ++round_;
      changed_.notify_all();
    } else if (!changed_.wait_for(lock, std::chrono::seconds(20), [&] { return round_ != round; })) {
      throw std::runtime_error("a collective waited 20 s for the other ranks");
    }
    std::vector<at::Tensor> all = result_;
    if (++taken_ == size_) result_.clear();
    return all;
  }

 private:
  int64_t size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<at::Tensor> deposits_, result_;
  int64_t arrived_ = 0, taken_ = 0, round_ = 0;
};

class ThreadCollectives final : public model::TensorCollectives {
 public:
  ThreadCollectives(Rendezvous& rendezvous, int64_t size, int64_t rank)
      : rendezvous_(rendezvous), size_(size), rank_(rank) {}
  int64_t size() const override { return size_; }
  int64_t rank() const override { return rank_; }
  at::Tensor all_reduce_sum(const at::Tensor& tensor) override {
    const auto all = rendezvous_.exchange(rank_, tensor);
    at::Tensor sum = all[0].clone();
    for (std::size_t r = 1; r < all.size(); ++r) sum = sum + all[r];
    return sum;
  }
  at::Tensor reduce_scatter_sum(const at::Tensor& tensor, int64_t dim) override {
    const at::Tensor sum = all_reduce_sum(tensor);
    const int64_t part = sum.size(dim) / size_;
    return sum.narrow(dim, rank_ * part, part).contiguous();
  }
  at::Tensor all_gather(const at::Tensor& tensor, int64_t dim) override {
    return at::cat(rendezvous_.exchange(rank_, tensor), dim);
  }

 private:
  Rendezvous& rendezvous_;
  int64_t size_, rank_;
};

/// Runs `body(collectives)` on `size` threads, one rank each; rethrows the first failure.
inline void on_ranks(int64_t size, const std::function<void(model::TensorCollectives&)>& body) {
  Rendezvous rendezvous(size);
  run_ranks_on_threads(size, [&](int64_t rank) {
    ThreadCollectives collectives(rendezvous, size, rank);
    body(collectives);
  });
}

}  // namespace graphed::testing
