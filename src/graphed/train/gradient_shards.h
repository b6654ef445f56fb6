// train/gradient_shards.h — the distributed optimizer's side of data parallelism (Megatron's
// --use-distributed-optimizer): the optimizer's flat buffers laid out in Megatron's buckets, the dense parameters'
// over the data-parallel ranks and the experts' over the expert-data ranks; each rank steps its shard of every
// bucket, then the new parameters (and working copies) are gathered from every rank's shard. Also the gradient
// norm's share of this rank's shards, and the moments gathered whole for a checkpoint and scattered back from one.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/dist/bucket_shards.h"
#include "graphed/train/adamw.h"
#include "graphed/train/element_runs.h"

namespace graphed::train {

/// The two laid-out buffers, one after the other in the optimizer's flat buffers. The dense buffer holds the
/// released parameters (read only through working copies: each rank keeps only its shard of their fp32 values, and
/// only their working copies are gathered) in buckets of their own before the rest (kept whole in fp32 on every rank,
/// gathered in fp32 too).
struct ShardedLayouts {
  dist::GradientBufferLayout dense;    ///< the first `dense_parameters` of the optimizer's
  dist::GradientBufferLayout experts;  ///< the rest (no elements without expert parallelism)
  int64_t dense_parameters = 0;
  int64_t released_elements = 0;  ///< the dense buffer's elements [0, this) are the released parameters' buckets
};

struct ShardingOptions {
  int64_t data_parallel_size = 1;
  int64_t expert_data_parallel_size = 1;
  int64_t expert_parameters = 0;          ///< the last ones of the optimizer's
  std::optional<int64_t> tied_embedding;  ///< its index among the optimizer's parameters, if shared over the pipeline
  std::optional<int64_t> bucket_size;     ///< elements; unset = one bucket per buffer (Megatron without overlap)
  /// By optimizer index: the dense parameters whose fp32 values each rank keeps only its shard of (those the model
  /// reads only through working copies); empty = none.
  std::vector<bool> released;
};

/// The layouts of parameters of `sizes` elements (the optimizer's order).
ShardedLayouts lay_out_shards(const std::vector<int64_t>& sizes, const ShardingOptions& options);
/// AdamW's FlatLayout over them, stepping the shards of `data_rank` (dense) and `expert_data_rank` (experts), the
/// released parameters' masters sharded.
FlatLayout flat_layout_of(const ShardedLayouts& layouts, int64_t data_rank, int64_t expert_data_rank);

class GradientShards {
 public:
  /// data (the data-parallel ranks), expert_data (the ranks holding the same experts; null without expert
  /// parallelism) and optimizer (laid out by flat_layout_of(layouts, their ranks)) outlive this.
  GradientShards(dist::Communicator& data, dist::Communicator* expert_data, const ShardedLayouts& layouts,
                 AdamW& optimizer);

  dist::BucketShards& dense() { return *dense_; }
  /// Null without expert parallelism.
  dist::BucketShards* experts() { return experts_ ? &*experts_ : nullptr; }
  /// The optimizer's flat gradients split at the experts' buffer: the dense part, the experts' part.
  at::Tensor dense_part(const at::Tensor& flat) const;
  at::Tensor expert_part(const at::Tensor& flat) const;

  /// The sum of the squares (float32) of this rank's shards of the dense gradients, the pieces of the parameters
  /// `uncounted` (the optimizer's indices) left out.
  at::Tensor dense_squares(const std::vector<int64_t>& uncounted) const;
  /// The same for the experts' gradients.
  at::Tensor expert_squares() const;
  /// After the step: every bucket's parameters and working copies gathered from the ranks' shards.
  void gather_parameters();
  /// --overlap-param-gather: launches every dense bucket's gather in the order the forward reads them (the kept
  /// parameters' first, waited for at once; then the released ones' from the last bucket to the first), leaving the
  /// released ones pending until wait_for() meets one of their parameters. Dense parameters only (no experts).
  void launch_parameter_gathers();
  /// Makes the current stream wait for the gather of `master`'s bucket, if one is pending.
  void wait_for(const at::Tensor& master);
  /// Waits for every pending gather (before anything outside training reads the weights).
  void finish_parameter_gathers();

  /// The optimizer's state as AdamW::state() names it, the moments whole on `into` (gathered over the data-parallel
  /// ranks: a collective every one of them calls; without `into` a rank takes part and keeps nothing, returning
  /// nothing). The step count and learning rate are the live tensors.
  std::vector<std::pair<std::string, at::Tensor>> whole_state(const std::optional<at::Device>& into);
  /// The same names with zeroed whole moments on `into`, for a checkpoint to be read into (no collective).
  std::vector<std::pair<std::string, at::Tensor>> empty_whole_state(const at::Device& into) const;
  /// `named` (the model's parameters by name) with every released parameter's fp32 values gathered whole on `into`
  /// in its place (a collective every data-parallel rank calls; without `into` the values are not kept).
  std::vector<std::pair<std::string, at::Tensor>> whole_parameters(
      const std::vector<std::pair<std::string, at::Tensor>>& named, const std::optional<at::Device>& into);
  /// Keeps this rank's shard of whole moments named as whole_state() names them (a checkpoint just read).
  void keep_own_state(const std::vector<std::pair<std::string, at::Tensor>>& whole);
  /// whole_state()'s names and tensors but the moments': the live step counts and learning rate (no collective).
  std::vector<std::pair<std::string, at::Tensor>> state_without_moments() const;
  /// This rank's shards of the moments as runs of the whole moments ("<parameter>.exp_avg", "...exp_avg_sq"), views
  /// of the live state: what a checkpoint writes per rank and a load reads into. The parameters `skipped` (the
  /// optimizer's indices) are left out.
  std::vector<ElementRun> own_moment_runs(const std::vector<int64_t>& skipped = {}) const;

 private:
  /// For each bucket of one buffer that starts before `end` (in the flat buffers; the buffer starts at
  /// `buffer_begin`), every rank's values of it in `compact` (coordinates of the moments: this rank's of that buffer
  /// start at `moment_begin`) gathered into `whole` (by optimizer index, whole shapes; the buffer's first parameter
  /// is `first_parameter`).
  void gather_compact(dist::BucketShards& shards, int64_t buffer_begin, int64_t moment_begin, int64_t first_parameter,
                      const at::Tensor& compact, int64_t end, std::vector<at::Tensor>& whole);
  void gather_every_buffer(const at::Tensor& compact, int64_t end, std::vector<at::Tensor>& whole);
  /// The elements of this rank's shards of one buffer: where the next buffer's moments start.
  static int64_t moment_count(const dist::BucketShards& shards);

  /// Launches bucket `bucket`'s gathers (copies, and the fp32 values past the released ones) of the buffer at `begin`.
  void launch_bucket_gathers(dist::BucketShards& shards, int64_t begin, std::size_t bucket,
                             std::vector<dist::PendingWork>& work);

  AdamW& optimizer_;
  ShardedLayouts layouts_;
  std::vector<std::vector<dist::PendingWork>> pending_;     ///< by dense bucket: its gathers not yet waited for
  std::unordered_map<const void*, std::size_t> bucket_of_;  ///< a released parameter's TensorImpl -> dense bucket
  std::optional<dist::BucketShards> dense_, experts_;
};

}  // namespace graphed::train
