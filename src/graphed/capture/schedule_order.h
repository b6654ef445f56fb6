// capture/schedule_order.h — the pipeline-schedule orders that per-layer graph capture walks
// (research/megatron-cudagraphs.md §5, Megatron's schedules.py and cuda_graphs.py): how many warmup
// microbatches a pipeline rank runs, the interleaved schedule table, the forward/backward order of
// model chunks that TransformerEngine's make_graphed_callables takes as `_order` (+k = forward of
// chunk k, -k = backward of chunk k, 1-based), and its per-layer expansion for expert-parallel
// communication overlap. Pure functions of integers; no CUDA, no model.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace graphed::capture {

/// (microbatch, model chunk), both 0-based.
using ScheduleEntry = std::pair<int64_t, int64_t>;

struct PipelineRank {
  int64_t microbatches = 1;      ///< M
  int64_t chunks = 1;            ///< virtual-pipeline model chunks (1 = no VPP)
  int64_t pipeline_size = 1;     ///< PP
  int64_t rank = 0;              ///< this rank, 0..PP-1
  int64_t microbatch_group = 1;  ///< microbatches per group of the interleaved schedule
  bool forward_only = false;
  bool expert_parallel_overlap = false;  ///< one more warmup microbatch under VPP
};

/// Warmup microbatches W of the rank (§5.1), clamped to M x chunks. Virtual chunks (> 1) need
/// pipeline_size > 1, as in Megatron.
int64_t warmup_microbatches(const PipelineRank& rank);

/// The interleaved schedule table (§5.2): groups of microbatch_group microbatches (the last group takes
/// the rest), each emitted chunk-major.
std::vector<ScheduleEntry> schedule_table(int64_t microbatches, int64_t chunks, int64_t microbatch_group);

/// The forward/backward order (§5.3): W forwards, then forward/backward pairs, then W backwards.
/// Length 2 x M x chunks; entries in ±1..±chunks.
std::vector<int64_t> convert_schedule_table_to_order(int64_t warmup, int64_t chunks,
                                                     const std::vector<ScheduleEntry>& table);

/// The per-layer order for expert-parallel communication overlap (§5.4): layers are numbered 1..L in
/// chunk order (layers_per_chunk[c] layers in chunk c); a backward layer id is negative; with
/// capture_wgrad each backward is followed by its weight-gradient entry (id - 0.5).
struct LayerOrder {
  std::vector<double> order;
  /// For each entry: (chunk, index within the chunk) of a forward layer, or nullopt for backward/wgrad.
  std::vector<std::optional<std::pair<int64_t, int64_t>>> chunk_ids;
};
LayerOrder get_overlap_moe_expert_parallel_comm_order(const std::vector<int64_t>& order,
                                                      const std::vector<int64_t>& layers_per_chunk, bool capture_wgrad);

}  // namespace graphed::capture
