// train/tensor_parallel_checkpoint.cpp — see train/tensor_parallel_checkpoint.h.
#include "graphed/train/tensor_parallel_checkpoint.h"

#include <ATen/core/grad_mode.h>

#include "graphed/util/error.h"

namespace graphed::train {

model::ParameterSplit split_of(const std::string& name, const TensorSplits& splits) {
  const auto whole = splits.find(name);
  if (whole != splits.end()) return whole->second;
  for (const char* state : {".exp_avg", ".exp_avg_sq"}) {
    const std::string suffix = state;
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const auto parameter = splits.find(name.substr(0, name.size() - suffix.size()));
    if (parameter != splits.end()) return parameter->second;
  }
  return {};
}

namespace {

/// One tensor joined over a group: every member's part gathered (a collective), joined on the host for the member
/// that keeps it; `part` itself where it is whole on every member (a first-rank bias is the first member's).
at::Tensor join_one(const at::Tensor& part, const model::ParameterSplit& split, dist::Communicator& group,
                    const std::optional<at::Device>& device) {
  if (!split.is_sharded()) return part;
  at::Tensor input = (device ? part.detach().to(*device) : part.detach()).contiguous();
  std::vector<at::Tensor> gathered;
  for (int64_t r = 0; r < group.size(); ++r) gathered.push_back(at::empty_like(input));
  group.all_gather(gathered, input).wait();
  return model::join_shards(gathered, split).to(at::kCPU);
}

}  // namespace

NamedTensorList join_over_group(const NamedTensorList& parts, const TensorSplits& splits, dist::Communicator& group,
                                bool keeps, const std::optional<at::Device>& device) {
  at::NoGradGuard no_grad;
  NamedTensorList whole;
  for (const auto& [name, part] : parts) {
    const at::Tensor joined = join_one(part, split_of(name, splits), group, device);
    if (keeps) whole.emplace_back(name, joined);
  }
  return whole;
}

NamedTensorList whole_tensors_for(const NamedTensorList& parts, const TensorSplits& splits, int64_t size) {
  NamedTensorList whole;
  for (const auto& [name, part] : parts) {
    const model::ParameterSplit split = split_of(name, splits);
    if (!split.is_sharded()) {  // loaded straight into the live tensor
      whole.emplace_back(name, part);
      continue;
    }
    whole.emplace_back(name, at::empty(model::whole_sizes(part, split, size), part.options().device(at::kCPU)));
  }
  return whole;
}

void keep_own_parts(const NamedTensorList& whole, const NamedTensorList& parts, const TensorSplits& splits,
                    model::TensorShard shard) {
  GRAPHED_INTERNAL_ASSERT(whole.size() == parts.size(), whole.size(), " whole tensors for ", parts.size(), " parts");
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const model::ParameterSplit split = split_of(parts[i].first, splits);
    if (split.is_sharded()) parts[i].second.copy_(model::take_shard(whole[i].second, split, shard));
  }
}

NamedTensorList join_through(const NamedTensorList& parts, const GroupJoins& joins) {
  at::NoGradGuard no_grad;
  // Tensor by tensor, through every join: a rank that skips a join goes on to the next with the others in step.
  bool keeps_whole = true;  // whether this rank keeps the last join's result (the same for every tensor)
  NamedTensorList whole;
  for (const auto& [name, part] : parts) {
    at::Tensor current = part;
    for (const GroupJoin& join : joins) {
      keeps_whole = join.takes_part && join.group->rank() == 0;
      if (!join.takes_part) continue;
      const at::Tensor joined = join_one(current, split_of(name, join.splits), *join.group, join.device);
      if (keeps_whole) current = joined;  // a member that does not keep it takes its own part on
    }
    if (keeps_whole) whole.emplace_back(name, current);
  }
  return whole;
}

std::vector<NamedTensorList> whole_levels(const NamedTensorList& parts, const GroupJoins& joins) {
  std::vector<NamedTensorList> levels = {parts};
  for (const GroupJoin& join : joins) levels.push_back(whole_tensors_for(levels.back(), join.splits, join.shard.size));
  return levels;
}

void keep_own_parts_through(const std::vector<NamedTensorList>& levels, const GroupJoins& joins) {
  GRAPHED_INTERNAL_ASSERT(levels.size() == joins.size() + 1, levels.size(), " levels for ", joins.size(), " joins");
  for (std::size_t join = joins.size(); join-- > 0;) {
    keep_own_parts(levels[join + 1], levels[join], joins[join].splits, joins[join].shard);
  }
}

int64_t whole_numel(const std::string& name, const at::Tensor& part, const GroupJoins& joins) {
  std::vector<int64_t> sizes = part.sizes().vec();
  for (const GroupJoin& join : joins) sizes = model::whole_sizes(sizes, split_of(name, join.splits), join.shard.size);
  int64_t count = 1;
  for (const int64_t size : sizes) count *= size;
  return count;
}

}  // namespace graphed::train
