// dist/communicator.h — one c10d process group (NCCL on GPUs, Gloo on CPUs) over a set of ranks, with
// the few operations training needs: in-place sum and max, all-gather, all-to-all, send, receive, broadcast and
// barrier. Every failure (a timeout, a peer that closed its connection) becomes a DistributedError naming this
// rank, the group and the operation; no library message reaches the user raw.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::dist {

namespace detail {
struct BackendHandle;  // the c10d backend (dist/detail/backend.h)
}

/// An operation in flight. wait(): with NCCL the current CUDA stream waits for it (the host does not);
/// with Gloo the host waits. Waiting twice is harmless.
class PendingWork {
 public:
  PendingWork() = default;
  /// `what`: the collective and its group, as collective_failure() words a failure of it on `global_rank`.
  PendingWork(std::shared_ptr<void> work, int64_t global_rank, std::string what);
  void wait();
  bool empty() const { return !work_; }

 private:
  std::shared_ptr<void> work_;  ///< c10::intrusive_ptr<c10d::Work>, type-erased to keep c10d out of this header
  int64_t global_rank_ = 0;
  std::string what_;
};

class Communicator {
 public:
  /// ranks: the members' global ranks in group order; global_rank: this process's.
  Communicator(std::shared_ptr<detail::BackendHandle> backend, std::string name, std::vector<int64_t> ranks,
               int64_t global_rank);
  ~Communicator();

  const std::string& name() const { return name_; }
  int64_t rank() const { return rank_; }  ///< within the group
  int64_t size() const { return static_cast<int64_t>(ranks_.size()); }
  const std::vector<int64_t>& ranks() const { return ranks_; }

  /// tensor <- sum over the group, in place. On the CPU 16-bit floats are summed in float32 and rounded once.
  PendingWork all_reduce_sum(at::Tensor& tensor);
  /// tensor <- element-wise max over the group, in place (FP8 amaxes).
  PendingWork all_reduce_max(at::Tensor& tensor);
  /// parts[r] <- member r's `tensor` (parts: one tensor of tensor's shape per member, in group order).
  PendingWork all_gather(std::vector<at::Tensor>& parts, at::Tensor& tensor);
  /// output <- every member's `input` side by side in group order (output: group size x input's elements, flat). On
  /// CUDA one NCCL all-gather into `output`, which may hold `input` as this member's part (in place); on the CPU a
  /// list all-gather of a copy of `input` (16-bit floats as their bytes).
  PendingWork all_gather_into(at::Tensor& output, const at::Tensor& input);
  /// output <- this member's part (dimension 0 split into equal parts in group order) of the sum of every
  /// member's `input` over the group. Gloo, which has no reduce-scatter in LibTorch 1.13, sums whole and slices.
  PendingWork reduce_scatter_sum(at::Tensor& output, at::Tensor& input);
  /// Rows of `input` to every member and rows from every member into `output` (both contiguous, dimension 0
  /// split in group order): input_splits[r] rows go to member r, output_splits[r] rows come from it. Empty
  /// splits mean equal parts.
  PendingWork all_to_all(at::Tensor& output, at::Tensor& input, std::vector<int64_t> output_splits,
                         std::vector<int64_t> input_splits);
  /// Point to point with `peer` (a rank within the group); tag tells transfers apart on Gloo.
  PendingWork send(at::Tensor& tensor, int64_t peer, int64_t tag);
  PendingWork receive(at::Tensor& tensor, int64_t peer, int64_t tag);
  /// tensor <- root's tensor, waited for.
  void broadcast(at::Tensor& tensor, int64_t root);
  /// Every member has arrived (blocks the host).
  void barrier();
  /// Releases the backend's communicators (LibTorch 2.x; nothing to do on 1.13). No call after it.
  void shutdown();

 private:
  PendingWork guarded(const std::string& what, const std::function<std::shared_ptr<void>()>& launch);
  /// tensor <- the sum (or, with `maximum`, the max) over the group, in place.
  PendingWork all_reduce(at::Tensor& tensor, bool maximum);

  std::shared_ptr<detail::BackendHandle> backend_;
  std::string name_;
  std::vector<int64_t> ranks_;
  int64_t rank_ = 0;
  int64_t global_rank_ = 0;
};

/// The message of a failed collective: "rank R: <what> in group <name> failed: <reason>; ...".
std::string collective_failure(int64_t global_rank, const std::string& what, const std::string& reason);

}  // namespace graphed::dist
