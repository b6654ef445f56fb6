// train/gradient_shards.cpp — see train/gradient_shards.h.
#include "graphed/train/gradient_shards.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include <ATen/core/grad_mode.h>

#include "graphed/util/error.h"

namespace graphed::train {

namespace {

/// The layout of the parameters `indices` (into `sizes`); its places and bucket members are named by those indices.
/// tied: a position in `indices`. No buckets when there are no parameters.
dist::GradientBufferLayout lay_out_part(const std::vector<int64_t>& sizes, const std::vector<int64_t>& indices,
                                        const dist::GradientBucketOptions& options, std::optional<int64_t> tied) {
  if (indices.empty()) {
    dist::GradientBufferLayout empty;
    empty.data_parallel_size = options.data_parallel_size;
    return empty;
  }
  std::vector<int64_t> part_sizes;
  for (const int64_t index : indices) part_sizes.push_back(sizes[static_cast<std::size_t>(index)]);
  dist::GradientBufferLayout part = dist::lay_out_gradient_buffer(part_sizes, options, tied);
  dist::GradientBufferLayout named;
  named.data_parallel_size = part.data_parallel_size;
  named.elements = part.elements;
  named.places.resize(static_cast<std::size_t>(*std::max_element(indices.begin(), indices.end()) + 1));
  for (std::size_t k = 0; k < indices.size(); ++k) named.places[static_cast<std::size_t>(indices[k])] = part.places[k];
  for (dist::GradientBucket bucket : part.buckets) {
    for (int64_t& member : bucket.parameters) member = indices[static_cast<std::size_t>(member)];
    named.buckets.push_back(std::move(bucket));
  }
  return named;
}

/// `first`'s buckets, then `second`'s after them, over `count` parameters (each part names its own).
dist::GradientBufferLayout join_layouts(const dist::GradientBufferLayout& first,
                                        const std::vector<int64_t>& first_indices,
                                        const dist::GradientBufferLayout& second,
                                        const std::vector<int64_t>& second_indices, int64_t count) {
  dist::GradientBufferLayout joined;
  joined.data_parallel_size = first.data_parallel_size;
  joined.places.resize(static_cast<std::size_t>(count));
  joined.buckets = first.buckets;
  for (const int64_t index : first_indices)
    joined.places[static_cast<std::size_t>(index)] = first.places[static_cast<std::size_t>(index)];
  const int64_t shift = first.elements;
  const auto bucket_shift = static_cast<int64_t>(first.buckets.size());
  for (const int64_t index : second_indices) {
    dist::ParameterPlace place = second.places[static_cast<std::size_t>(index)];
    joined.places[static_cast<std::size_t>(index)] = {place.begin + shift, place.end + shift,
                                                      place.bucket + bucket_shift};
  }
  for (dist::GradientBucket bucket : second.buckets) {
    bucket.begin += shift;
    bucket.end += shift;
    bucket.filled_end += shift;
    joined.buckets.push_back(std::move(bucket));
  }
  joined.elements = first.elements + second.elements;
  return joined;
}

}  // namespace

ShardedLayouts lay_out_shards(const std::vector<int64_t>& sizes, const ShardingOptions& options) {
  const auto all = static_cast<int64_t>(sizes.size());
  GRAPHED_INTERNAL_ASSERT(options.expert_parameters >= 0 && options.expert_parameters <= all, options.expert_parameters,
                          " expert parameters of ", all);
  ShardedLayouts layouts;
  layouts.dense_parameters = all - options.expert_parameters;
  // The released parameters' buckets first, then the kept ones' (a tied embedding is kept, in a bucket of its own).
  std::vector<int64_t> released, kept;
  for (int64_t p = 0; p < layouts.dense_parameters; ++p) {
    const bool release =
        static_cast<std::size_t>(p) < options.released.size() && options.released[static_cast<std::size_t>(p)];
    (release ? released : kept).push_back(p);
  }
  std::optional<int64_t> tied;
  for (std::size_t k = 0; k < kept.size(); ++k) {
    if (options.tied_embedding == kept[k]) tied = static_cast<int64_t>(k);
  }
  const dist::GradientBucketOptions bucket_options{options.data_parallel_size, options.bucket_size};
  const dist::GradientBufferLayout released_part = lay_out_part(sizes, released, bucket_options, std::nullopt);
  layouts.dense = join_layouts(released_part, released, lay_out_part(sizes, kept, bucket_options, tied), kept,
                               layouts.dense_parameters);
  layouts.released_elements = released_part.elements;
  if (options.expert_parameters > 0) {
    const std::vector<int64_t> expert_sizes(sizes.begin() + layouts.dense_parameters, sizes.end());
    layouts.experts =
        dist::lay_out_gradient_buffer(expert_sizes, {options.expert_data_parallel_size, options.bucket_size});
  }
  return layouts;
}

FlatLayout flat_layout_of(const ShardedLayouts& layouts, int64_t data_rank, int64_t expert_data_rank) {
  FlatLayout flat;
  const auto add = [&](const dist::GradientBufferLayout& layout, int64_t rank, int64_t begin) {
    if (layout.places.empty()) return;
    for (const dist::ParameterPlace& place : layout.places) flat.offsets.push_back(begin + place.begin);
    for (const dist::BucketShard& shard : dist::shards_of(layout, rank, layout.data_parallel_size))
      flat.stepped.push_back({begin + shard.begin, shard.end - shard.begin});
  };
  add(layouts.dense, data_rank, 0);
  add(layouts.experts, expert_data_rank, layouts.dense.elements);
  flat.elements = layouts.dense.elements + layouts.experts.elements;
  flat.sharded_masters = layouts.released_elements;
  return flat;
}

GradientShards::GradientShards(dist::Communicator& data, dist::Communicator* expert_data, const ShardedLayouts& layouts,
                               AdamW& optimizer)
    : optimizer_(optimizer), layouts_(layouts) {
  GRAPHED_INTERNAL_ASSERT(optimizer.flat_parameters().defined() &&
                              optimizer.flat_parameters().numel() + optimizer.sharded_masters() ==
                                  layouts.dense.elements + layouts.experts.elements &&
                              optimizer.sharded_masters() == layouts.released_elements,
                          "the distributed optimizer's AdamW is not laid out by its layouts");
  dense_.emplace(data, layouts.dense);
  if (!layouts.experts.places.empty()) {
    GRAPHED_INTERNAL_ASSERT(expert_data != nullptr, "the experts' shards without an expert-data group");
    experts_.emplace(*expert_data, layouts.experts);
  }
}

at::Tensor GradientShards::dense_part(const at::Tensor& flat) const {
  return flat.narrow(0, 0, layouts_.dense.elements);
}

at::Tensor GradientShards::expert_part(const at::Tensor& flat) const {
  return flat.narrow(0, layouts_.dense.elements, layouts_.experts.elements);
}

namespace {

/// The sum of the squares (float32) of `rank`'s shards of `buffer`, less those of the pieces of `uncounted`.
at::Tensor squares_of_shards(const at::Tensor& buffer, const std::vector<dist::BucketShard>& shards,
                             const std::set<int64_t>& uncounted) {
  at::Tensor squares = at::zeros({}, buffer.options().dtype(at::kFloat));
  for (const dist::BucketShard& shard : shards) {
    squares = squares + buffer.narrow(0, shard.begin, shard.end - shard.begin).norm().to(at::kFloat).square();
    for (const dist::ShardPiece& piece : shard.pieces) {
      if (uncounted.count(piece.parameter) == 0) continue;
      squares = squares - buffer.narrow(0, piece.buffer_begin, piece.elements).to(at::kFloat).square().sum();
    }
  }
  return squares;
}

}  // namespace

at::Tensor GradientShards::dense_squares(const std::vector<int64_t>& uncounted) const {
  const std::set<int64_t> left_out(uncounted.begin(), uncounted.end());
  return squares_of_shards(dense_part(optimizer_.flat_gradients()), dense_->shards(), left_out);
}

at::Tensor GradientShards::expert_squares() const {
  if (!experts_) return at::zeros({}, optimizer_.flat_gradients().options().dtype(at::kFloat));
  return squares_of_shards(expert_part(optimizer_.flat_gradients()), experts_->shards(), {});
}

void GradientShards::launch_bucket_gathers(dist::BucketShards& shards, int64_t begin, std::size_t bucket,
                                           std::vector<dist::PendingWork>& work) {
  const dist::GradientBucket& whole_bucket = shards.layout().buckets[bucket];
  const dist::BucketShard& own = shards.shards()[bucket];
  const auto whole_and_own = [&](const at::Tensor& flat, int64_t shift) {
    return std::make_pair(flat.narrow(0, begin + whole_bucket.begin - shift, whole_bucket.end - whole_bucket.begin),
                          flat.narrow(0, begin + own.begin - shift, own.end - own.begin));
  };
  if (optimizer_.flat_copies().defined()) {
    auto [whole, part] = whole_and_own(optimizer_.flat_copies(), 0);
    work.push_back(shards.gather_bucket(whole, part, static_cast<int64_t>(bucket)));
  }
  if (begin + whole_bucket.begin >= optimizer_.sharded_masters()) {  // kept whole: the fp32 values too
    auto [whole, part] = whole_and_own(optimizer_.flat_parameters(), optimizer_.sharded_masters());
    work.push_back(shards.gather_bucket(whole, part, static_cast<int64_t>(bucket)));
  }
}

void GradientShards::gather_parameters() {
  at::NoGradGuard no_grad;
  finish_parameter_gathers();
  std::vector<dist::PendingWork> work;
  for (std::size_t b = 0; b < layouts_.dense.buckets.size(); ++b) launch_bucket_gathers(*dense_, 0, b, work);
  if (experts_) {
    for (std::size_t b = 0; b < layouts_.experts.buckets.size(); ++b)
      launch_bucket_gathers(*experts_, layouts_.dense.elements, b, work);
  }
  for (dist::PendingWork& pending : work) pending.wait();
}

void GradientShards::launch_parameter_gathers() {
  at::NoGradGuard no_grad;
  GRAPHED_INTERNAL_ASSERT(!experts_, "overlapped parameter gathers with experts (rule PL-23 refuses them)");
  const std::vector<dist::GradientBucket>& buckets = layouts_.dense.buckets;
  if (bucket_of_.empty()) {
    for (std::size_t i = 0; i < optimizer_.parameters().size(); ++i) {
      if (!optimizer_.released(i)) continue;
      const auto bucket = static_cast<std::size_t>(layouts_.dense.places[i].bucket);
      bucket_of_.emplace(optimizer_.parameters()[i].unsafeGetTensorImpl(), bucket);
    }
  }
  finish_parameter_gathers();  // none should be left; a left one must not overlap the step that follows
  pending_.assign(buckets.size(), {});
  // The forward reads the kept parameters (embeddings, norms) first and the released ones from the first layer's
  // (the last bucket) on: every rank launches in that order, and the kept ones are waited for here.
  std::vector<dist::PendingWork> kept;
  for (std::size_t b = buckets.size(); b-- > 0;) {
    if (buckets[b].begin >= optimizer_.sharded_masters()) launch_bucket_gathers(*dense_, 0, b, kept);
  }
  for (dist::PendingWork& pending : kept) pending.wait();
  for (std::size_t b = buckets.size(); b-- > 0;) {
    if (buckets[b].begin < optimizer_.sharded_masters()) launch_bucket_gathers(*dense_, 0, b, pending_[b]);
  }
}

void GradientShards::wait_for(const at::Tensor& master) {
  const auto found = bucket_of_.find(master.unsafeGetTensorImpl());
  if (found == bucket_of_.end() || found->second >= pending_.size()) return;
  for (dist::PendingWork& pending : pending_[found->second]) pending.wait();
  pending_[found->second].clear();
}

void GradientShards::finish_parameter_gathers() {
  for (std::vector<dist::PendingWork>& bucket : pending_) {
    for (dist::PendingWork& pending : bucket) pending.wait();
    bucket.clear();
  }
}

void GradientShards::gather_compact(dist::BucketShards& shards, int64_t buffer_begin, int64_t moment_begin,
                                    int64_t first_parameter, const at::Tensor& compact, int64_t end,
                                    std::vector<at::Tensor>& whole) {
  const dist::GradientBufferLayout& layout = shards.layout();
  int64_t moment = moment_begin;
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const dist::GradientBucket& bucket = layout.buckets[b];
    const int64_t length = shards.shards()[b].end - shards.shards()[b].begin;
    if (buffer_begin + bucket.begin < end) {
      at::Tensor gathered = at::empty({bucket.end - bucket.begin}, compact.options());
      shards.gather_bucket(gathered, compact.narrow(0, moment, length), static_cast<int64_t>(b)).wait();
      for (const int64_t p : bucket.parameters) {
        const dist::ParameterPlace& place = layout.places[static_cast<std::size_t>(p)];
        at::Tensor& into = whole[static_cast<std::size_t>(first_parameter + p)];
        if (!into.defined()) continue;  // a rank that takes part without keeping it
        into.view({-1}).copy_(gathered.narrow(0, place.begin - bucket.begin, place.end - place.begin));
      }
    }
    moment += length;
  }
}

void GradientShards::gather_every_buffer(const at::Tensor& compact, int64_t end, std::vector<at::Tensor>& whole) {
  gather_compact(*dense_, 0, 0, 0, compact, end, whole);
  if (experts_)
    gather_compact(*experts_, layouts_.dense.elements, moment_count(*dense_), layouts_.dense_parameters, compact, end,
                   whole);
}

namespace {

/// AdamW::state()'s names over whole moments (one pair per parameter; none: the moments left out), with the live step
/// count and learning rate.
std::vector<std::pair<std::string, at::Tensor>> named_state(const AdamW& optimizer,
                                                            const std::vector<at::Tensor>& exp_avg,
                                                            const std::vector<at::Tensor>& exp_avg_sq) {
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (std::size_t i = 0; i < optimizer.names().size(); ++i) {
    const std::string& name = optimizer.names()[i];
    if (!exp_avg.empty()) {
      state.emplace_back(name + ".exp_avg", exp_avg[i]);
      state.emplace_back(name + ".exp_avg_sq", exp_avg_sq[i]);
    }
    state.emplace_back(name + ".step", optimizer.step_count());
  }
  state.emplace_back("lr", optimizer.learning_rate());
  return state;
}

/// Zeroed tensors of the parameters' shapes on `into`, or undefined ones without it.
std::vector<at::Tensor> whole_buffers(const AdamW& optimizer, const std::optional<at::Device>& into) {
  std::vector<at::Tensor> buffers;
  for (const at::Tensor& parameter : optimizer.parameters())
    buffers.push_back(into ? at::zeros(parameter.sizes(), parameter.options().device(*into)) : at::Tensor());
  return buffers;
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> GradientShards::whole_state(const std::optional<at::Device>& into) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> exp_avg = whole_buffers(optimizer_, into), exp_avg_sq = whole_buffers(optimizer_, into);
  const int64_t every = std::numeric_limits<int64_t>::max();
  gather_every_buffer(optimizer_.flat_exp_avg(), every, exp_avg);
  gather_every_buffer(optimizer_.flat_exp_avg_sq(), every, exp_avg_sq);
  if (!into) return {};
  return named_state(optimizer_, exp_avg, exp_avg_sq);
}

std::vector<std::pair<std::string, at::Tensor>> GradientShards::empty_whole_state(const at::Device& into) const {
  return named_state(optimizer_, whole_buffers(optimizer_, into), whole_buffers(optimizer_, into));
}

std::vector<std::pair<std::string, at::Tensor>> GradientShards::whole_parameters(
    const std::vector<std::pair<std::string, at::Tensor>>& named, const std::optional<at::Device>& into) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> values;
  for (std::size_t i = 0; i < optimizer_.parameters().size(); ++i) {
    const at::Tensor& parameter = optimizer_.parameters()[i];
    const bool keep = into && optimizer_.released(i);
    values.push_back(keep ? at::zeros(parameter.sizes(), parameter.options().device(*into)) : at::Tensor());
  }
  // Only the released parameters' buckets: the masters' compact buffer holds those alone.
  gather_every_buffer(optimizer_.master_shards(), optimizer_.sharded_masters(), values);
  std::map<const c10::TensorImpl*, at::Tensor> gathered;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i].defined()) gathered.emplace(optimizer_.parameters()[i].unsafeGetTensorImpl(), values[i]);
  }
  std::vector<std::pair<std::string, at::Tensor>> whole;
  for (const auto& [name, tensor] : named) {
    const auto found = gathered.find(tensor.unsafeGetTensorImpl());
    whole.emplace_back(name, found != gathered.end() ? found->second : tensor);
  }
  return whole;
}

int64_t GradientShards::moment_count(const dist::BucketShards& shards) {
  int64_t count = 0;
  for (const dist::BucketShard& shard : shards.shards()) count += shard.end - shard.begin;
  return count;
}

std::vector<std::pair<std::string, at::Tensor>> GradientShards::state_without_moments() const {
  return named_state(optimizer_, {}, {});
}

std::vector<ElementRun> GradientShards::own_moment_runs(const std::vector<int64_t>& skipped) const {
  std::vector<ElementRun> runs;
  const auto add = [&](const dist::BucketShards& shards, int64_t moment_begin, int64_t first_parameter) {
    int64_t moment = moment_begin;
    for (const dist::BucketShard& shard : shards.shards()) {
      for (const dist::ShardPiece& piece : shard.pieces) {
        const int64_t parameter = first_parameter + piece.parameter;
        if (std::find(skipped.begin(), skipped.end(), parameter) != skipped.end()) continue;
        const std::string& name = optimizer_.names()[static_cast<std::size_t>(parameter)];
        for (const bool second : {false, true}) {
          const at::Tensor& flat = second ? optimizer_.flat_exp_avg_sq() : optimizer_.flat_exp_avg();
          runs.push_back({name + (second ? ".exp_avg_sq" : ".exp_avg"), piece.parameter_offset,
                          flat.narrow(0, moment + piece.shard_offset, piece.elements)});
        }
      }
      moment += shard.end - shard.begin;
    }
  };
  add(*dense_, 0, 0);
  if (experts_) add(*experts_, moment_count(*dense_), layouts_.dense_parameters);
  return runs;
}

void GradientShards::keep_own_state(const std::vector<std::pair<std::string, at::Tensor>>& whole) {
  at::NoGradGuard no_grad;
  const std::map<std::string, at::Tensor> by_name(whole.begin(), whole.end());
  for (const ElementRun& run : own_moment_runs()) {
    run.values.copy_(by_name.at(run.tensor).reshape({-1}).narrow(0, run.begin, run.values.numel()));
  }
}

}  // namespace graphed::train
