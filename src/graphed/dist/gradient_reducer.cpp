// dist/gradient_reducer.cpp — see dist/gradient_reducer.h.
#include "graphed/dist/gradient_reducer.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "graphed/kernels/accumulation_listeners.h"
#include "graphed/util/error.h"

namespace graphed::dist {
namespace {

/// Runs a callback after a gradient accumulator has run. Autograd runs it (and its hooks) also without a
/// gradient, after a fused kernel accumulated the parameter's in place and told the listener: such a parameter
/// is then counted twice per backward, every backward alike, which the learned counts absorb; the hook's count
/// comes after the kernel's work either way, so it never launches a bucket early.
class AccumulatedHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit AccumulatedHook(std::function<void()> callback) : callback_(std::move(callback)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    callback_();
    return outputs;
  }

 private:
  std::function<void()> callback_;
};

}  // namespace

GradientReducer::GradientReducer(Communicator& group, std::vector<at::Tensor> parameters,
                                 std::vector<at::Tensor> gradients, at::Tensor flat, GradientReducerOptions options)
    : group_(group),
      parameters_(std::move(parameters)),
      gradients_(std::move(gradients)),
      flat_(std::move(flat)),
      options_(options) {
  GRAPHED_INTERNAL_ASSERT(parameters_.size() == gradients_.size(), "parameters and gradients differ in count");
  if (options_.shards != nullptr) {
    take_layout_buckets(options_.shards->layout());
  } else {
    make_buckets(options_.bucket_bytes);
  }
  if (options_.staging.defined()) {
    GRAPHED_INTERNAL_ASSERT(flat_.defined() && options_.staging.numel() == flat_.numel(), "a staging buffer of ",
                            options_.staging.numel(), " elements for a flat buffer of ",
                            flat_.defined() ? flat_.numel() : 0);
    for (Bucket& bucket : buckets_) {
      bucket.staged =
          options_.staging.narrow(0, bucket.slice.storage_offset() - flat_.storage_offset(), bucket.slice.numel());
    }
  }
  expected_.assign(parameters_.size(), -1);
  seen_.assign(parameters_.size(), 0);
}

GradientReducer::~GradientReducer() {
  if (listener_ >= 0) kernels::remove_accumulation_listener(listener_);
}

void GradientReducer::make_buckets(int64_t bucket_bytes) {
  bucket_of_.assign(parameters_.size(), 0);
  Bucket current;
  int64_t bytes = 0;
  const auto close = [&] {
    if (current.parameters.empty()) return;
    if (flat_.defined()) {  // the bucket's gradients sit side by side in the flat buffer
      const at::Tensor& first = gradients_[static_cast<std::size_t>(current.parameters.back())];
      const int64_t begin = first.storage_offset() - flat_.storage_offset();
      int64_t length = 0;
      for (const int64_t p : current.parameters) length += gradients_[static_cast<std::size_t>(p)].numel();
      current.slice = flat_.narrow(0, begin, length);
    }
    buckets_.push_back(std::move(current));
    current = Bucket();
    bytes = 0;
  };
  for (auto p = static_cast<int64_t>(parameters_.size()) - 1; p >= 0; --p) {
    const at::Tensor& gradient = gradients_[static_cast<std::size_t>(p)];
    bucket_of_[static_cast<std::size_t>(p)] = static_cast<int64_t>(buckets_.size());
    current.parameters.push_back(p);
    bytes += gradient.numel() * static_cast<int64_t>(gradient.element_size());
    if (bytes >= bucket_bytes) close();
  }
  close();
}

void GradientReducer::take_layout_buckets(const GradientBufferLayout& layout) {
  GRAPHED_INTERNAL_ASSERT(
      flat_.defined() && flat_.numel() == layout.elements && layout.places.size() == parameters_.size(),
      "the distributed optimizer's buckets need its laid-out buffer");
  bucket_of_.assign(parameters_.size(), 0);
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const GradientBucket& laid_out = layout.buckets[b];
    Bucket bucket;
    bucket.parameters = laid_out.parameters;
    bucket.index = static_cast<int64_t>(b);
    bucket.slice = flat_.narrow(0, laid_out.begin, laid_out.end - laid_out.begin);
    for (const int64_t p : bucket.parameters) bucket_of_[static_cast<std::size_t>(p)] = static_cast<int64_t>(b);
    buckets_.push_back(std::move(bucket));
  }
}

void GradientReducer::install_hooks() {
  for (std::size_t p = 0; p < parameters_.size(); ++p) {
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters_[p]);
    if (!accumulator) continue;
    const auto index = static_cast<int64_t>(p);
    accumulator->add_post_hook(std::make_unique<AccumulatedHook>([this, index] { on_accumulated(index); }));
    accumulators_.push_back(std::move(accumulator));  // the parameter holds its accumulator only weakly
  }
  // The fused kernels that add into .grad themselves run no accumulator: they tell the listeners instead.
  // A gradient is known by its data (a view of the flat buffer), whatever tensor object the kernel holds.
  for (std::size_t p = 0; p < gradients_.size(); ++p) {
    if (gradients_[p].defined() && gradients_[p].numel() > 0)
      parameter_of_gradient_.emplace(gradients_[p].data_ptr(), static_cast<int64_t>(p));
  }
  listener_ = kernels::add_accumulation_listener([this](const at::Tensor& parameter) {
    const at::Tensor& gradient = parameter.grad();
    if (!gradient.defined()) return;
    const auto found = parameter_of_gradient_.find(gradient.data_ptr());
    if (found != parameter_of_gradient_.end()) on_accumulated(found->second);
  });
}

void GradientReducer::arm() {
  // The hooks go in at the first arm(), after that iteration's forward: the AccumulateGrad nodes they hold are
  // the ones that forward made, on the stream it ran on (a full-iteration graph's side stream, where its warmup
  // and capture run). A node keeps the stream current when it was made, and a capture refuses a node of
  // another stream: why PyTorch builds DDP on the capture's side stream, and Megatron-LM its DDP on the
  // full-iteration capture stream (PR 6021). Made at start-up they would belong to the default stream.
  if (options_.overlap_with_backward && group_.size() > 1 && listener_ < 0) install_hooks();
  armed_ = true;
  const at::Device device = gradients_.empty() ? at::Device(at::kCPU) : gradients_.front().device();
  backward_stream_.reset();
  if (device.is_cuda()) backward_stream_ = c10::impl::getDeviceGuardImpl(device.type())->getStream(device);
  std::fill(seen_.begin(), seen_.end(), 0);
  next_bucket_ = 0;
  for (Bucket& bucket : buckets_) {
    bucket.launched = false;
    bucket.work.clear();
    bucket.pending = 0;
    for (const int64_t p : bucket.parameters)
      bucket.pending += std::max<int64_t>(0, expected_[static_cast<std::size_t>(p)]);
  }
}

void GradientReducer::on_accumulated(int64_t parameter) {
  const std::lock_guard<std::mutex> lock(mutex_);  // autograd's threads may report at once
  if (!armed_) return;
  ++seen_[static_cast<std::size_t>(parameter)];
  if (!learned_) return;  // the first backward only counts
  Bucket& bucket = buckets_[static_cast<std::size_t>(bucket_of_[static_cast<std::size_t>(parameter)])];
  if (--bucket.pending == 0) launch_ready_buckets();
}

void GradientReducer::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending <= 0) launch(buckets_[next_bucket_++]);
}

void GradientReducer::launch(Bucket& bucket) {
  if (bucket.launched) return;
  bucket.launched = true;
  if (!backward_stream_) return launch_collectives(bucket);
  const c10::StreamGuard on_backward_stream(*backward_stream_);
  launch_collectives(bucket);
}

void GradientReducer::launch_collectives(Bucket& bucket) {
  if (bucket.staged.defined()) bucket.staged.copy_(bucket.slice);  // the cast, on the stream the gradients came from
  if (options_.shards != nullptr) {
    at::Tensor& summed = options_.staging.defined() ? options_.staging : flat_;
    bucket.work.push_back(options_.shards->reduce_scatter(summed, bucket.index));
  } else if (bucket.slice.defined()) {
    bucket.work.push_back(group_.all_reduce_sum(bucket.staged.defined() ? bucket.staged : bucket.slice));
  } else {
    for (const int64_t p : bucket.parameters)
      bucket.work.push_back(group_.all_reduce_sum(gradients_[static_cast<std::size_t>(p)]));
  }
}

void GradientReducer::finish() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (group_.size() > 1) {
    for (; next_bucket_ < buckets_.size(); ++next_bucket_) launch(buckets_[next_bucket_]);
    for (Bucket& bucket : buckets_) {
      for (PendingWork& work : bucket.work) work.wait();
      bucket.work.clear();
    }
  }
  take_sums();
  if (armed_ && !learned_) {
    expected_ = seen_;
    learned_ = true;
  } else if (armed_) {
    // A bucket launches once its expected gradients are in: a parameter accumulated more often than in
    // the first backward would have been left out of its bucket's sum.
    GRAPHED_INTERNAL_ASSERT(seen_ == expected_,
                            "a parameter's gradient count per backward changed between "
                            "iterations; overlapping reduction needs a static backward");
  }
  armed_ = false;
}

void GradientReducer::take_sums() {
  const int64_t divisor = options_.divisor.value_or(group_.size());
  const double scale = 1.0 / static_cast<double>(divisor);
  const bool staged_sums = options_.staging.defined() && group_.size() > 1;  // a group of one sums nothing
  if (options_.shards != nullptr) {  // only this rank's shards hold sums, and only they are read (stepped, normed)
    const std::vector<at::Tensor> sums = options_.shards->own_shards(flat_);
    const std::vector<at::Tensor> staged =
        staged_sums ? options_.shards->own_shards(options_.staging) : std::vector<at::Tensor>();
    for (std::size_t b = 0; b < sums.size(); ++b) {
      at::Tensor sum = sums[b];
      if (!staged.empty()) sum.copy_(staged[b]);
      if (divisor > 1) sum.mul_(scale);
    }
    return;
  }
  if (staged_sums) {
    for (Bucket& bucket : buckets_) bucket.slice.copy_(bucket.staged);
  }
  if (divisor <= 1) return;
  if (flat_.defined()) {
    flat_.mul_(scale);
  } else {
    for (at::Tensor& gradient : gradients_) gradient.mul_(scale);
  }
}

}  // namespace graphed::dist
