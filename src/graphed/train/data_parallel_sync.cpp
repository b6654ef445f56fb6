// train/data_parallel_sync.cpp — see train/data_parallel_sync.h.
#include "graphed/train/data_parallel_sync.h"

namespace graphed::train {

DataParallelSync::DataParallelSync(dist::ProcessGroups& groups, AdamW& optimizer, bool overlap,
                                   at::Tensor shared_embedding, std::vector<at::Tensor> tensor_duplicates,
                                   const std::vector<at::Tensor>& tensor_summed)
    : groups_(groups), shared_embedding_(std::move(shared_embedding)) {
  for (const at::Tensor& parameter : tensor_summed) summed_gradients_.push_back(parameter.grad());
  // Megatron's rule: a parameter whole on every tensor-parallel rank counts once, on the first.
  if (groups.layout().tensor_rank() != 0) uncounted_ = std::move(tensor_duplicates);
  dist::GradientReducerOptions options;
  options.overlap_with_backward = overlap;
  reducer_ = std::make_unique<dist::GradientReducer>(groups.data(), optimizer.parameters(), optimizer.gradients(),
                                                     optimizer.flat_gradients(), options);
  counts_shared_embedding_ = groups.layout().holds_embedding();
}

void DataParallelSync::before_last_backward() { reducer_->arm(); }

void DataParallelSync::after_backward() {
  reducer_->finish();
  if (!summed_gradients_.empty()) {  // one all-reduce over the tensor group for all of them
    std::vector<at::Tensor> flat;
    for (const at::Tensor& gradient : summed_gradients_) flat.push_back(gradient.reshape({-1}));
    at::Tensor sum = at::cat(flat);
    groups_.tensor().all_reduce_sum(sum).wait();
    int64_t offset = 0;
    for (at::Tensor gradient : summed_gradients_) {
      gradient.copy_(sum.narrow(0, offset, gradient.numel()).view_as(gradient));
      offset += gradient.numel();
    }
  }
  if (shared_embedding_.defined() && groups_.embedding() != nullptr) {
    at::Tensor gradient = shared_embedding_.grad();
    groups_.embedding()->all_reduce_sum(gradient).wait();
  }
}

at::Tensor DataParallelSync::gradient_norm(const AdamW& optimizer) {
  const dist::ParallelLayout& layout = groups_.layout();
  // Equal on every data-parallel rank: with one stage and one tensor rank, this rank's norm is the norm.
  if (layout.holds_whole_model()) return optimizer.gradient_norm();
  // Each rank's sum of squares, the shared embedding counted by the first stage only and a parameter whole
  // on every tensor rank by the first tensor rank only.
  at::Tensor squares = optimizer.gradient_norm().square();
  if (shared_embedding_.defined() && !counts_shared_embedding_) {
    squares = squares - shared_embedding_.grad().to(at::kFloat).square().sum();
  }
  for (const at::Tensor& parameter : uncounted_) squares = squares - parameter.grad().to(at::kFloat).square().sum();
  squares = squares.reshape({1}).contiguous();
  if (layout.tensor_size > 1) groups_.tensor().all_reduce_sum(squares).wait();
  if (layout.is_pipelined()) groups_.pipeline().all_reduce_sum(squares).wait();
  return squares.clamp_min(0.0).sqrt().reshape({});
}

std::pair<at::Tensor, at::Tensor> DataParallelSync::reduce_losses(const at::Tensor& loss, const at::Tensor& aux_loss) {
  at::Tensor both = at::stack({loss.to(at::kFloat), aux_loss.to(at::kFloat)});
  if (groups_.layout().is_pipelined()) groups_.pipeline().all_reduce_sum(both).wait();  // zeros off the last stage
  if (groups_.data().size() > 1) {
    groups_.data().all_reduce_sum(both).wait();
    both.div_(static_cast<double>(groups_.data().size()));
  }
  return {both[0], both[1]};
}

}  // namespace graphed::train
