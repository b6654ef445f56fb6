// dist/gradient_reducer.h — data-parallel gradient averaging over a Communicator, in buckets (as
// Megatron's and PyTorch's DDP do), launched after the backward or overlapped with it, summed as they are or in bf16.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/Stream.h>

#include "graphed/dist/bucket_shards.h"
#include "graphed/dist/communicator.h"

namespace torch::autograd {
struct Node;
}

namespace graphed::dist {

struct GradientReducerOptions {
  int64_t bucket_bytes = 40 * 1024 * 1024;  ///< a bucket closes once it holds this many bytes
  bool overlap_with_backward = true;        ///< launch buckets from backward hooks (eager runs)
  /// What the sums are divided by; unset = the group size (the mean over its ranks). The experts' gradients
  /// under expert parallelism are summed over the ranks holding the same experts and divided by the whole
  /// data-parallel size, even in a group of one (Megatron's mean over every data-parallel rank).
  std::optional<int64_t> divisor;
  /// The distributed optimizer's buckets (outliving the reducer): the layout's buckets, in its order, each
  /// reduce-scattered into this rank's shard of it instead of all-reduced (`flat` must be the laid-out buffer);
  /// unset = buckets of bucket_bytes from the last parameter, all-reduced.
  BucketShards* shards = nullptr;
  /// --grad-reduce-in-bf16: a buffer of the flat buffer's size (bf16) the sums run in. Each bucket is cast into its
  /// slice just before its collective, and the sums (this rank's shards, with `shards`) are copied back before the
  /// division. Undefined = the gradients are summed as they are. Needs `flat`.
  at::Tensor staging;
};

/// The gradients are views of the optimizer's flat buffer, so a bucket is one contiguous slice: parameters
/// are bucketed from the last to the first, the order in which backward produces their gradients. With
/// overlap, hooks on the parameters' gradient accumulators, and a listener for the fused kernels that
/// accumulate in place (kernels/accumulation_listeners.h), launch each bucket's all-reduce during the last
/// microbatch's backward as soon as its gradients are complete, in bucket order (so every rank issues the
/// same collectives in the same order). They learn how often each gradient is accumulated per backward (tied
/// embeddings: twice) from the first backward, which reduces after the fact, and need every later backward to
/// accumulate the same (a static backward: dense models). Without overlap (graphed runs, MoE) finish()
/// launches every bucket after the backward. Either way the sums are the same numbers.
class GradientReducer {
 public:
  /// parameters and their gradients (allocated, each a view of `flat` when it is defined), in the
  /// optimizer's order; group: the data-parallel ranks, outliving the reducer.
  GradientReducer(Communicator& group, std::vector<at::Tensor> parameters, std::vector<at::Tensor> gradients,
                  at::Tensor flat, GradientReducerOptions options);
  ~GradientReducer();

  /// Call before the last microbatch's backward, on the stream the backward runs on: from here, complete
  /// buckets are launched by the hooks (installed at the first call).
  void arm();
  /// Launches the buckets not yet launched, makes the current stream wait for all, and divides every
  /// gradient by the group size (the mean of the ranks' gradients) or the options' divisor.
  void finish();
  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<int64_t> parameters;  ///< indices into parameters_
    int64_t index = 0;                ///< the layout's bucket (with shards)
    at::Tensor slice;                 ///< the flat buffer's slice (undefined without a flat buffer)
    at::Tensor staged;                ///< the staging buffer's same slice (undefined without one)
    int64_t pending = 0;              ///< accumulations still to come in this backward
    bool launched = false;
    std::vector<PendingWork> work;
  };
  void make_buckets(int64_t bucket_bytes);
  void take_layout_buckets(const GradientBufferLayout& layout);
  void install_hooks();
  void on_accumulated(int64_t parameter);
  void launch_ready_buckets();
  void launch(Bucket& bucket);
  void launch_collectives(Bucket& bucket);
  /// After the collectives: the sums copied back from the staging buffer and divided, over what this rank steps.
  void take_sums();

  Communicator& group_;
  std::vector<at::Tensor> parameters_, gradients_;
  at::Tensor flat_;
  GradientReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<int64_t> bucket_of_;  ///< parameter -> bucket
  std::vector<int64_t> expected_;   ///< accumulations per backward (learned; -1 = not yet)
  std::vector<int64_t> seen_;       ///< accumulations in the armed backward
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::unordered_map<const void*, int64_t> parameter_of_gradient_;  ///< a gradient's data -> parameter
  int64_t listener_ = -1;  ///< kernels::add_accumulation_listener's id (-1: none)
  /// The stream the backward runs on (CUDA), taken by arm(): buckets launch after its work wherever the hooks
  /// run (autograd's thread, whose current stream may be another).
  std::optional<c10::Stream> backward_stream_;
  std::mutex mutex_;  ///< the hooks and the listener may run on several of autograd's threads
  bool armed_ = false;
  bool learned_ = false;
  std::size_t next_bucket_ = 0;  ///< buckets launch in order
};

}  // namespace graphed::dist
