// dist/parallel_layout.h — where each rank sits in the tensor x data x pipeline grid and which layers it
// holds. Megatron's order, tensor ranks fastest and pipeline ranks slowest: rank = (pipeline rank x
// data-parallel size + data-parallel rank) x tensor size + tensor rank, so a tensor-parallel group is
// consecutive ranks (one node's GPUs). With virtual stages, model chunk c of pipeline rank r is virtual
// stage c x stages + r (Megatron's interleaved assignment). Expert parallelism splits the data-parallel ranks
// as Megatron's expert order does (its expert tensor size being the tensor size): data rank = expert-data rank
// x expert size + expert rank, so an expert group is `expert_size` consecutive data ranks and an expert-data
// group every expert_size-th one. Pure integers.
#pragma once

#include <cstdint>
#include <vector>

#include "graphed/config/run_config.h"

namespace graphed::dist {

/// The layers of one model chunk, and whether it starts (embedding) or ends (loss) the model.
struct ModelChunk {
  int64_t first_layer = 0;
  int64_t layer_count = 0;
  bool first_stage = true;  ///< holds the embedding
  bool last_stage = true;   ///< holds the final norm, output layer and loss
  int64_t end_layer() const { return first_layer + layer_count; }
};

struct ParallelLayout {
  int64_t world_size = 1;
  int64_t rank = 0;
  int64_t tensor_size = 1;
  int64_t pipeline_size = 1;
  int64_t data_size = 1;
  int64_t expert_size = 1;  ///< expert-parallel ranks (divides data_size); 1 = every rank holds every expert
  int64_t chunks = 1;       ///< model chunks per pipeline rank (virtual stages); 1 = 1F1B
  int64_t num_layers = 0;

  int64_t tensor_rank() const { return rank % tensor_size; }
  int64_t data_rank() const { return rank / tensor_size % data_size; }
  int64_t pipeline_rank() const { return rank / (tensor_size * data_size); }
  /// This rank's place among the ranks that share out the experts, and among those holding the same experts.
  int64_t expert_rank() const { return data_rank() % expert_size; }
  int64_t expert_data_rank() const { return data_rank() / expert_size; }
  int64_t expert_data_size() const { return data_size / expert_size; }
  /// The rank at these coordinates (tensor rank 0 unless given).
  int64_t rank_at(int64_t pipeline_rank, int64_t data_rank, int64_t tensor_rank = 0) const {
    return (pipeline_rank * data_size + data_rank) * tensor_size + tensor_rank;
  }
  /// Ranks with this rank's pipeline and tensor ranks (they all-reduce gradients), in data-rank order.
  std::vector<int64_t> data_group() const;
  /// Ranks that exchange tokens and split the experts (this rank's pipeline, tensor and expert-data ranks), in
  /// expert-rank order.
  std::vector<int64_t> expert_group() const;
  /// Ranks holding the same experts (this rank's pipeline, tensor and expert ranks): they average the experts'
  /// gradients, in expert-data-rank order.
  std::vector<int64_t> expert_data_group() const;
  /// Ranks with this rank's data and tensor ranks (one pipeline), in stage order.
  std::vector<int64_t> pipeline_group() const;
  /// Ranks with this rank's pipeline and data ranks (they share each layer's weights), in tensor-rank order.
  std::vector<int64_t> tensor_group() const;
  /// Chunk c (0-based) of pipeline rank r.
  ModelChunk chunk(int64_t pipeline_rank, int64_t c) const;
  ModelChunk chunk(int64_t c) const { return chunk(pipeline_rank(), c); }
  /// Virtual stage of chunk c of pipeline rank r (0 .. stages x chunks - 1).
  int64_t virtual_stage(int64_t pipeline_rank, int64_t c) const { return c * pipeline_size + pipeline_rank; }
  bool is_pipelined() const { return pipeline_size > 1; }
  /// Whether this rank holds every parameter whole (one stage, one tensor rank, every expert): its state is the
  /// model's.
  bool holds_whole_model() const { return pipeline_size == 1 && tensor_size == 1 && expert_size == 1; }
  /// Whether this rank holds the embedding (first stage) or the loss (last stage).
  bool holds_embedding() const { return pipeline_rank() == 0; }
  bool holds_loss() const { return pipeline_rank() == pipeline_size - 1; }
};

/// The layout of `rank` under a resolved configuration (its parallel sizes already validated).
ParallelLayout make_parallel_layout(const config::RunConfig& config, int64_t rank);

}  // namespace graphed::dist
