// train/tensor_parallel_checkpoint.h — checkpoints stay whole under tensor and expert parallelism: on save the
// ranks of a group join their parts of every parameter and optimizer state (model::join_shards), group after group
// (the expert group's shares of the experts, then the tensor group's parts), so a split run writes what one process
// would; on load each rank reads the whole tensors and keeps its part. Either way a checkpoint crosses layouts.
#pragma once

#include <map>
#include <optional>
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
/// tensor). Only the member that `keeps` them gets them; the others get an empty list. `device`: where the group's
/// collectives take tensors (a part held elsewhere, such as a host tensor of an earlier join, is copied there).
NamedTensorList join_over_group(const NamedTensorList& parts, const TensorSplits& splits, dist::Communicator& group,
                                bool keeps, const std::optional<at::Device>& device = std::nullopt);

/// Tensors of the whole shapes (uninitialized, on the host) for `parts`, held by `size` ranks: what a load
/// fills; a whole part is its own live tensor.
NamedTensorList whole_tensors_for(const NamedTensorList& parts, const TensorSplits& splits, int64_t size);
/// Copies this rank's part of each whole tensor into its live tensor (the same names, in the same order).
void keep_own_parts(const NamedTensorList& whole, const NamedTensorList& parts, const TensorSplits& splits,
                    model::TensorShard shard);

/// One step from a rank's parts toward the whole tensors: how they split over a group, and this rank's place in it.
struct GroupJoin {
  TensorSplits splits;
  model::TensorShard shard;
  dist::Communicator* group = nullptr;
  at::Device device = at::kCPU;  ///< where the group's collectives take tensors
  bool takes_part = true;        ///< whether this rank is in the join (its group's other members are too)
};
using GroupJoins = std::vector<GroupJoin>;

/// join_over_group through each join this rank takes part in, in turn, one tensor at a time (so a rank that skips a
/// join waits on no other join's whole list): each group's first member keeps the joined tensor and takes it to the
/// next join; another member takes its own part there (what it holds whole is the first member's anyway). The first
/// member of the last group gets the whole tensors; every other rank an empty list.
NamedTensorList join_through(const NamedTensorList& parts, const GroupJoins& joins);
/// What a load fills, and how each rank then keeps its part: levels[0] is `parts` (the live tensors), levels[i + 1]
/// the tensors whole over join i (whole_tensors_for), so levels.back() holds the whole tensors.
std::vector<NamedTensorList> whole_levels(const NamedTensorList& parts, const GroupJoins& joins);
/// After a load into levels.back(): keep_own_parts through the joins in reverse, down to the live tensors.
void keep_own_parts_through(const std::vector<NamedTensorList>& levels, const GroupJoins& joins);
/// The element count of a parameter whole over every join (`name` picks its split in each).
int64_t whole_numel(const std::string& name, const at::Tensor& part, const GroupJoins& joins);

}  // namespace graphed::train
