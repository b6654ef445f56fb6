// train/gradient_shards.cpp — see train/gradient_shards.h.
#include "graphed/train/gradient_shards.h"

#include <map>
#include <set>

#include <ATen/core/grad_mode.h>

#include "graphed/util/error.h"

namespace graphed::train {

ShardedLayouts lay_out_shards(const std::vector<int64_t>& sizes, const ShardingOptions& options) {
  const auto all = static_cast<int64_t>(sizes.size());
  GRAPHED_INTERNAL_ASSERT(options.expert_parameters >= 0 && options.expert_parameters <= all, options.expert_parameters,
                          " expert parameters of ", all);
  ShardedLayouts layouts;
  layouts.dense_parameters = all - options.expert_parameters;
  const auto split = sizes.begin() + layouts.dense_parameters;
  std::optional<int64_t> tied = options.tied_embedding;
  if (tied && *tied >= layouts.dense_parameters) tied.reset();
  layouts.dense =
      dist::lay_out_gradient_buffer({sizes.begin(), split}, {options.data_parallel_size, options.bucket_size}, tied);
  if (options.expert_parameters > 0) {
    layouts.experts =
        dist::lay_out_gradient_buffer({split, sizes.end()}, {options.expert_data_parallel_size, options.bucket_size});
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
  return flat;
}

GradientShards::GradientShards(dist::Communicator& data, dist::Communicator* expert_data, const ShardedLayouts& layouts,
                               AdamW& optimizer)
    : optimizer_(optimizer), layouts_(layouts) {
  GRAPHED_INTERNAL_ASSERT(optimizer.flat_parameters().defined() &&
                              optimizer.flat_parameters().numel() == layouts.dense.elements + layouts.experts.elements,
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

void GradientShards::gather_parameters() {
  at::NoGradGuard no_grad;
  for (const at::Tensor* flat : {&optimizer_.flat_parameters(), &optimizer_.flat_copies()}) {
    if (!flat->defined()) continue;
    at::Tensor dense = dense_part(*flat);
    dense_->all_gather(dense);
    if (!experts_) continue;
    at::Tensor experts = expert_part(*flat);
    experts_->all_gather(experts);
  }
}

void GradientShards::gather_moments(dist::BucketShards& shards, int64_t moment_begin, int64_t first_parameter,
                                    std::vector<std::pair<at::Tensor, at::Tensor>>& whole_moments) {
  const dist::GradientBufferLayout& layout = shards.layout();
  int64_t moment = moment_begin;
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const dist::GradientBucket& bucket = layout.buckets[b];
    const int64_t length = shards.shards()[b].end - shards.shards()[b].begin;
    for (const bool second : {false, true}) {
      const at::Tensor& flat = second ? optimizer_.flat_exp_avg_sq() : optimizer_.flat_exp_avg();
      at::Tensor whole = at::empty({bucket.end - bucket.begin}, flat.options());
      shards.gather_bucket(whole, flat.narrow(0, moment, length), static_cast<int64_t>(b)).wait();
      for (const int64_t p : bucket.parameters) {
        const dist::ParameterPlace& place = layout.places[static_cast<std::size_t>(p)];
        auto& pair = whole_moments[static_cast<std::size_t>(first_parameter + p)];
        (second ? pair.second : pair.first)
            .view({-1})
            .copy_(whole.narrow(0, place.begin - bucket.begin, place.end - place.begin));
      }
    }
    moment += length;
  }
}

std::vector<std::pair<std::string, at::Tensor>> GradientShards::whole_state() {
  at::NoGradGuard no_grad;
  std::vector<std::pair<at::Tensor, at::Tensor>> moments;
  for (const at::Tensor& parameter : optimizer_.parameters())
    moments.emplace_back(at::zeros_like(parameter), at::zeros_like(parameter));
  gather_moments(*dense_, 0, 0, moments);
  if (experts_) gather_moments(*experts_, moment_count(*dense_), layouts_.dense_parameters, moments);
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (std::size_t i = 0; i < moments.size(); ++i) {
    const std::string& name = optimizer_.names()[i];
    state.emplace_back(name + ".exp_avg", moments[i].first);
    state.emplace_back(name + ".exp_avg_sq", moments[i].second);
    state.emplace_back(name + ".step", optimizer_.step_count());
  }
  state.emplace_back("lr", optimizer_.learning_rate());
  return state;
}

int64_t GradientShards::moment_count(const dist::BucketShards& shards) {
  int64_t count = 0;
  for (const dist::BucketShard& shard : shards.shards()) count += shard.end - shard.begin;
  return count;
}

void GradientShards::keep_own_state(const std::vector<std::pair<std::string, at::Tensor>>& whole) {
  at::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> by_name(whole.begin(), whole.end());
  const auto keep = [&](const dist::BucketShards& shards, int64_t moment_begin, int64_t first_parameter) {
    int64_t moment = moment_begin;
    for (const dist::BucketShard& shard : shards.shards()) {
      for (const dist::ShardPiece& piece : shard.pieces) {
        const std::string& name = optimizer_.names()[static_cast<std::size_t>(first_parameter + piece.parameter)];
        for (const bool second : {false, true}) {
          const at::Tensor& flat = second ? optimizer_.flat_exp_avg_sq() : optimizer_.flat_exp_avg();
          const at::Tensor& loaded = by_name.at(name + (second ? ".exp_avg_sq" : ".exp_avg"));
          flat.narrow(0, moment + piece.shard_offset, piece.elements)
              .copy_(loaded.reshape({-1}).narrow(0, piece.parameter_offset, piece.elements));
        }
      }
      moment += shard.end - shard.begin;
    }
  };
  keep(*dense_, 0, 0);
  if (experts_) keep(*experts_, moment_count(*dense_), layouts_.dense_parameters);
}

}  // namespace graphed::train
