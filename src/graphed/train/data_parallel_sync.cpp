// train/data_parallel_sync.cpp — see train/data_parallel_sync.h.
#include "graphed/train/data_parallel_sync.h"

#include "graphed/util/error.h"

namespace graphed::train {

namespace {

/// The parameters [first, first + count) of the optimizer's, their gradients and their part of its flat buffer.
struct ParameterRange {
  std::vector<at::Tensor> parameters, gradients;
  at::Tensor flat;
};

ParameterRange range_of(const AdamW& optimizer, std::size_t first, std::size_t count) {
  ParameterRange range;
  int64_t elements = 0, begin = 0;
  for (std::size_t p = 0; p < first + count; ++p) {
    const at::Tensor& gradient = optimizer.gradients()[p];
    if (p < first) {
      begin += gradient.numel();
      continue;
    }
    range.parameters.push_back(optimizer.parameters()[p]);
    range.gradients.push_back(gradient);
    elements += gradient.numel();
  }
  if (optimizer.flat_gradients().defined()) range.flat = optimizer.flat_gradients().narrow(0, begin, elements);
  return range;
}

/// The optimizer's indices of those of `parameters` it steps.
std::vector<int64_t> indices_of(const AdamW& optimizer, const std::vector<at::Tensor>& parameters) {
  std::vector<int64_t> indices;
  for (const at::Tensor& wanted : parameters) {
    for (std::size_t i = 0; i < optimizer.parameters().size(); ++i) {
      if (optimizer.parameters()[i].unsafeGetTensorImpl() == wanted.unsafeGetTensorImpl())
        indices.push_back(static_cast<int64_t>(i));
    }
  }
  return indices;
}

/// The bf16 buffer --grad-reduce-in-bf16 sums in, laid out as the optimizer's flat gradients: its working copies where
/// it keeps bf16 ones and nothing reads them after a backward (DataParallelOptions::reduce_in_bf16 says why they may),
/// else a new buffer.
at::Tensor staging_for(const AdamW& optimizer, bool copies_reread) {
  const at::Tensor& flat = optimizer.flat_gradients();
  GRAPHED_INTERNAL_ASSERT(flat.defined(), "bf16 gradient sums without the optimizer's flat gradient buffer");
  const at::Tensor& copies = optimizer.flat_copies();
  // The same memory under a version counter of its own: the backward has saved copies (of layers it has yet to reach),
  // and autograd would take the casts into buckets it is done with for writes into those.
  if (!copies_reread && copies.defined() && copies.scalar_type() == at::kBFloat16 && copies.numel() == flat.numel())
    return copies.variable_data();
  return at::empty({flat.numel()}, flat.options().dtype(at::kBFloat16));
}

/// The part of `staging` beside `flat`'s part of the optimizer's flat gradients (undefined without either).
at::Tensor staging_part(const at::Tensor& staging, const at::Tensor& flat, const AdamW& optimizer) {
  if (!staging.defined() || !flat.defined()) return {};
  return staging.narrow(0, flat.storage_offset() - optimizer.flat_gradients().storage_offset(), flat.numel());
}

}  // namespace

DataParallelSync::DataParallelSync(dist::ProcessGroups& groups, AdamW& optimizer, DataParallelOptions options)
    : groups_(groups),
      shared_embedding_(std::move(options.shared_embedding)),
      shards_(options.shards),
      defer_gathers_(options.defer_gathers) {
  for (const at::Tensor& parameter : options.tensor_summed) summed_gradients_.push_back(parameter.grad());
  // Megatron's rule: a parameter whole on every tensor-parallel rank counts once, on the first.
  if (groups.layout().tensor_rank() != 0) uncounted_ = std::move(options.tensor_duplicates);
  const std::size_t all = optimizer.parameters().size();
  const auto experts = static_cast<std::size_t>(options.expert_parameters);
  GRAPHED_INTERNAL_ASSERT(experts <= all && (experts == 0 || groups.layout().expert_size > 1),
                          options.expert_parameters, " expert parameters of ", all, " with expert size ",
                          groups.layout().expert_size);
  const at::Tensor staging = options.reduce_in_bf16 ? staging_for(optimizer, options.copies_reread) : at::Tensor();
  const bool in_copies = optimizer.flat_copies().defined() && staging.defined() &&
                         staging.data_ptr() == optimizer.flat_copies().data_ptr();
  if (staging.defined() && !in_copies) staging_ = staging;
  dist::GradientReducerOptions reducing;
  reducing.overlap_with_backward = options.overlap;
  ParameterRange dense = range_of(optimizer, 0, all - experts);
  if (shards_ != nullptr) {  // the laid-out buffer, each bucket reduce-scattered
    dense.flat = shards_->dense_part(optimizer.flat_gradients());
    reducing.shards = &shards_->dense();
  }
  reducing.staging = staging_part(staging, dense.flat, optimizer);
  if (experts > 0) {
    dense_gradients_ = dense.gradients;
    dense_flat_ = dense.flat;
  }
  reducer_ = std::make_unique<dist::GradientReducer>(groups.data(), std::move(dense.parameters),
                                                     std::move(dense.gradients), dense.flat, reducing);
  if (experts > 0) {
    ParameterRange expert = range_of(optimizer, all - experts, experts);
    if (shards_ != nullptr) {
      expert.flat = shards_->expert_part(optimizer.flat_gradients());
      reducing.shards = shards_->experts();
    }
    reducing.staging = staging_part(staging, expert.flat, optimizer);
    expert_gradients_ = expert.gradients;
    expert_flat_ = expert.flat;
    reducing.divisor = groups.layout().data_size;
    expert_reducer_ = std::make_unique<dist::GradientReducer>(groups.expert_data(), std::move(expert.parameters),
                                                              std::move(expert.gradients), expert.flat, reducing);
  }
  counts_shared_embedding_ = groups.layout().holds_embedding();
  if (shards_ != nullptr) {
    std::vector<at::Tensor> uncounted = uncounted_;
    if (shared_embedding_.defined() && !counts_shared_embedding_) uncounted.push_back(shared_embedding_);
    uncounted_indices_ = indices_of(optimizer, uncounted);
  }
}

void DataParallelSync::before_forward() {
  if (defer_gathers_) shards_->launch_parameter_gathers();
}

void DataParallelSync::after_step() {
  if (shards_ != nullptr && !defer_gathers_) shards_->gather_parameters();
}

void DataParallelSync::before_last_backward() {
  reducer_->arm();
  if (expert_reducer_) expert_reducer_->arm();
}

void DataParallelSync::after_backward() {
  reducer_->finish();
  if (expert_reducer_) expert_reducer_->finish();
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

namespace {

/// The sum of the gradients' squares (float32), over the flat buffer's range where there is one.
at::Tensor squares_of(const std::vector<at::Tensor>& gradients, const at::Tensor& flat) {
  if (flat.defined()) return flat.norm().to(at::kFloat).square();
  if (gradients.empty()) return at::zeros({}, at::kFloat);
  return at::stack(at::_foreach_norm(gradients, 2)).norm().to(at::kFloat).square();
}

}  // namespace

at::Tensor DataParallelSync::squares_of_every_expert() {
  at::Tensor experts = squares_of(expert_gradients_, expert_flat_).reshape({1}).contiguous();
  groups_.expert().all_reduce_sum(experts).wait();
  return experts.reshape({});
}

std::pair<at::Tensor, at::Tensor> DataParallelSync::dense_and_expert_squares(const AdamW& optimizer) {
  // The shared embedding counted by the first stage only and a parameter whole on every tensor rank by the first
  // tensor rank only; under expert parallelism every expert rank's experts apart (Megatron's norm over the dense and
  // the expert parameters).
  at::Tensor squares =
      expert_gradients_.empty() ? optimizer.gradient_norm().square() : squares_of(dense_gradients_, dense_flat_);
  if (shared_embedding_.defined() && !counts_shared_embedding_) {
    squares = squares - shared_embedding_.grad().to(at::kFloat).square().sum();
  }
  for (const at::Tensor& parameter : uncounted_) squares = squares - parameter.grad().to(at::kFloat).square().sum();
  return {squares, expert_gradients_.empty() ? at::Tensor() : squares_of_every_expert()};
}

std::pair<at::Tensor, at::Tensor> DataParallelSync::squares_of_shards() {
  // Each rank holds the sums of its shards only: summed over the data-parallel ranks (the experts' over the ranks
  // holding the same experts, then over the expert group).
  at::Tensor dense = shards_->dense_squares(uncounted_indices_).reshape({1}).contiguous();
  groups_.data().all_reduce_sum(dense).wait();
  if (expert_gradients_.empty()) return {dense.reshape({}), at::Tensor()};
  at::Tensor experts = shards_->expert_squares().reshape({1}).contiguous();
  groups_.expert_data().all_reduce_sum(experts).wait();
  groups_.expert().all_reduce_sum(experts).wait();
  return {dense.reshape({}), experts.reshape({})};
}

at::Tensor DataParallelSync::gradient_norm(const AdamW& optimizer) {
  const dist::ParallelLayout& layout = groups_.layout();
  // Equal on every data-parallel rank: with one stage and one tensor rank, this rank's norm is the norm.
  if (shards_ == nullptr && layout.holds_whole_model()) return optimizer.gradient_norm();
  auto [squares, experts] = shards_ != nullptr ? squares_of_shards() : dense_and_expert_squares(optimizer);
  // Experts split over the tensor ranks add their parts over them as the dense layers do; whole experts (expert
  // tensor size 1) are already counted once each over the expert group, which then runs across the tensor ranks.
  const bool experts_split = layout.splits_experts_over_tensor_ranks();
  if (experts.defined() && experts_split) squares = squares.to(experts.device()) + experts;
  squares = squares.reshape({1}).contiguous();
  if (layout.tensor_size > 1) groups_.tensor().all_reduce_sum(squares).wait();
  if (experts.defined() && !experts_split) squares = squares + experts.to(squares.device());
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
