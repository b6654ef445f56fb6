// capture/schedule_order.cpp — see capture/schedule_order.h. Bad arguments are bugs of the caller
// (the trainer derives them from a validated configuration), so they are internal assertions.
#include "graphed/capture/schedule_order.h"

#include <algorithm>

#include "graphed/util/error.h"

namespace graphed::capture {

int64_t warmup_microbatches(const PipelineRank& rank) {
  GRAPHED_INTERNAL_ASSERT(rank.microbatches >= 1 && rank.chunks >= 1 && rank.pipeline_size >= 1 && rank.rank >= 0 &&
                          rank.rank < rank.pipeline_size && rank.microbatch_group >= 1);
  GRAPHED_INTERNAL_ASSERT(rank.chunks == 1 || rank.pipeline_size > 1, "virtual pipeline chunks (", rank.chunks,
                          ") need pipeline parallelism");
  const int64_t total = rank.microbatches * rank.chunks;
  int64_t warmup = 0;
  if (rank.forward_only) {
    warmup = total;
  } else if (rank.pipeline_size > 1 && rank.chunks == 1) {
    warmup = rank.pipeline_size - rank.rank - 1;
  } else if (rank.pipeline_size > 1) {
    warmup = 2 * (rank.pipeline_size - rank.rank - 1) + (rank.chunks - 1) * rank.microbatch_group;
    if (rank.expert_parallel_overlap) ++warmup;
  }
  return std::min(warmup, total);
}

std::vector<ScheduleEntry> schedule_table(int64_t microbatches, int64_t chunks, int64_t microbatch_group) {
  GRAPHED_INTERNAL_ASSERT(microbatches >= 1 && chunks >= 1 && microbatch_group >= 1);
  std::vector<ScheduleEntry> table;
  for (int64_t start = 0; start < microbatches; start += microbatch_group) {
    const int64_t end = start + microbatch_group >= microbatches ? microbatches : start + microbatch_group;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      for (int64_t microbatch = start; microbatch < end; ++microbatch) table.emplace_back(microbatch, chunk);
    }
  }
  return table;
}

std::vector<int64_t> convert_schedule_table_to_order(int64_t warmup, int64_t chunks,
                                                     const std::vector<ScheduleEntry>& table) {
  const auto n = static_cast<int64_t>(table.size());
  GRAPHED_INTERNAL_ASSERT(warmup >= 0 && warmup <= n, "warmup ", warmup, " of ", n, " table entries");
  std::vector<int64_t> forward, backward;
  for (const auto& [microbatch, chunk] : table) {
    forward.push_back(chunk + 1);
    backward.push_back(chunk - chunks);  // backward runs the chunks in reverse: -k is chunk k's backward
  }
  std::vector<int64_t> order(forward.begin(), forward.begin() + warmup);
  for (int64_t i = warmup; i < n; ++i) {
    order.push_back(forward[static_cast<std::size_t>(i)]);
    order.push_back(backward[static_cast<std::size_t>(i - warmup)]);
  }
  for (int64_t i = n - warmup; i < n && warmup > 0; ++i) order.push_back(backward[static_cast<std::size_t>(i)]);
  return order;
}

LayerOrder get_overlap_moe_expert_parallel_comm_order(const std::vector<int64_t>& order,
                                                      const std::vector<int64_t>& layers_per_chunk,
                                                      bool capture_wgrad) {
  const auto chunks = static_cast<int64_t>(layers_per_chunk.size());
  std::vector<int64_t> first_layer(static_cast<std::size_t>(chunks), 1);
  for (int64_t c = 1; c < chunks; ++c) {
    first_layer[static_cast<std::size_t>(c)] =
        first_layer[static_cast<std::size_t>(c - 1)] + layers_per_chunk[static_cast<std::size_t>(c - 1)];
  }
  const auto forward_layers = [&](int64_t chunk) {  // chunk 1-based
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < layers_per_chunk[static_cast<std::size_t>(chunk - 1)]; ++i)
      ids.push_back(first_layer[static_cast<std::size_t>(chunk - 1)] + i);
    return ids;
  };
  const auto backward_layers = [&](int64_t chunk) {
    std::vector<int64_t> ids = forward_layers(chunk);
    std::reverse(ids.begin(), ids.end());
    for (auto& id : ids) id = -id;
    return ids;
  };
  LayerOrder result;
  const auto emit_forward = [&](int64_t id, int64_t chunk, int64_t index) {
    result.order.push_back(static_cast<double>(id));
    result.chunk_ids.emplace_back(std::make_pair(chunk - 1, index));
  };
  const auto emit = [&](double id) {
    result.order.push_back(id);
    result.chunk_ids.emplace_back(std::nullopt);
  };
  const auto n = static_cast<int64_t>(order.size());
  int64_t first_backward = n, last_forward = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (order[static_cast<std::size_t>(i)] < 0 && first_backward == n) first_backward = i;
    if (order[static_cast<std::size_t>(i)] > 0) last_forward = i;
  }
  // Warmup: every forward before the first backward.
  for (int64_t i = 0; i < first_backward; ++i) {
    const int64_t chunk = order[static_cast<std::size_t>(i)];
    const auto ids = forward_layers(chunk);
    for (std::size_t k = 0; k < ids.size(); ++k) emit_forward(ids[k], chunk, static_cast<int64_t>(k));
  }
  // 1F1B: (backward, forward) pairs, layer by layer, forward first at each step.
  int64_t cooldown_start = first_backward;
  if (first_backward < last_forward) {
    for (int64_t i = first_backward; i + 1 <= last_forward; i += 2) {
      const int64_t backward_chunk = -order[static_cast<std::size_t>(i)];
      const int64_t forward_chunk = order[static_cast<std::size_t>(i + 1)];
      GRAPHED_INTERNAL_ASSERT(backward_chunk > 0 && forward_chunk > 0, "order entries ", i, " and ", i + 1,
                              " are not a (backward, forward) pair");
      const auto back = backward_layers(backward_chunk);
      const auto fore = forward_layers(forward_chunk);
      const std::size_t steps = std::max(back.size(), fore.size());
      for (std::size_t k = 0; k < steps; ++k) {
        if (k < fore.size()) emit_forward(fore[k], forward_chunk, static_cast<int64_t>(k));
        if (k < back.size()) {
          emit(static_cast<double>(back[k]));
          if (capture_wgrad && k + 1 < back.size()) emit(static_cast<double>(back[k]) - 0.5);
        }
      }
      if (capture_wgrad && !back.empty()) emit(static_cast<double>(back.back()) - 0.5);
      cooldown_start = i + 2;
    }
  }
  // Cooldown: the remaining backwards.
  for (int64_t i = std::max(cooldown_start, last_forward + 1); i < n; ++i) {
    const int64_t value = order[static_cast<std::size_t>(i)];
    if (value > 0) continue;
    for (const int64_t id : backward_layers(-value)) {
      emit(static_cast<double>(id));
      if (capture_wgrad) emit(static_cast<double>(id) - 0.5);
    }
  }
  return result;
}

}  // namespace graphed::capture
