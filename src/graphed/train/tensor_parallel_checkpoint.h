// train/tensor_parallel_checkpoint.h — checkpoints stay whole under tensor parallelism: on save the ranks of
// a tensor-parallel group join their parts of every parameter and optimizer state (model::join_shards), so
// a TP run writes what one process would; on load each rank reads the whole tensors and keeps its part.
// Either way a checkpoint crosses layouts: TP=2 saves what TP=1 loads, and the reverse.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graphed/dist/communicator.h"
#include "graphed/model/tensor_shards.h"

namespace graphed::train {

using NamedTensorList = std::vector<std::pair<std::string, at::Tensor>>;
using TensorSplits = std::map<std::string, model::ParameterSplit>;

/// The split of a parameter or of an optimizer state of it ("<parameter>.exp_avg", ".exp_avg_sq"; a step
/// count or the learning rate is whole): `splits` lists the parameters that are not whole.
model::ParameterSplit split_of(const std::string& name, const TensorSplits& splits);

/// Collective over `group` (every member calls it with the same names in the same order): the whole
/// tensors from each member's parts, on the host, one at a time (a device never holds more than one whole
/// tensor). Only the member that `keeps` them gets them; the others get an empty list.
NamedTensorList join_over_group(const NamedTensorList& parts, const TensorSplits& splits, dist::Communicator& group,
                                bool keeps);

/// Tensors of the whole shapes (uninitialized, on the host) for `parts`, held by `size` ranks: what a load
/// fills; a whole part is its own live tensor.
NamedTensorList whole_tensors_for(const NamedTensorList& parts, const TensorSplits& splits, int64_t size);
/// Copies this rank's part of each whole tensor into its live tensor (the same names, in the same order).
void keep_own_parts(const NamedTensorList& whole, const NamedTensorList& parts, const TensorSplits& splits,
                    model::TensorShard shard);

}  // namespace graphed::train
