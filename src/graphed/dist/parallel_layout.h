// dist/parallel_layout.h — where each rank sits in the tensor x data x pipeline grid and which layers it
// holds. Megatron's order, tensor ranks fastest and pipeline ranks slowest: rank = (pipeline rank x
// data-parallel size + data-parallel rank) x tensor size + tensor rank, so a tensor-parallel group is
// consecutive ranks (one node's GPUs). With virtual stages, model chunk c of pipeline rank r is virtual
// stage c x stages + r (Megatron's interleaved assignment). Expert parallelism numbers the ranks
// of a stage again, as Megatron's expert order does: rank within the stage = (expert-data rank x expert size + expert
// rank) x expert tensor size + expert tensor rank. With the expert tensor size equal to the tensor size (Megatron's
// default) that is data rank = expert-data rank x expert size + expert rank: an expert group is `expert_size`
// consecutive data ranks of one tensor rank. With expert tensor size 1 the expert groups run across the tensor
// ranks. Pure integers.
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
  int64_t expert_size = 1;         ///< expert-parallel ranks; 1 = every rank holds every expert
  int64_t expert_tensor_size = 1;  ///< tensor ranks an expert is split over: tensor_size, or 1
  int64_t chunks = 1;              ///< model chunks per pipeline rank (virtual stages); 1 = 1F1B
  int64_t num_layers = 0;

  int64_t tensor_rank() const { return rank % tensor_size; }
  int64_t data_rank() const { return rank / tensor_size % data_size; }
  int64_t pipeline_rank() const { return rank / (tensor_size * data_size); }
  /// This rank's place among the ranks that share out the experts, among those holding the same experts, and among
  /// those splitting each expert.
  int64_t expert_rank() const { return stage_rank() / expert_tensor_size % expert_size; }
  int64_t expert_data_rank() const { return stage_rank() / (expert_tensor_size * expert_size); }
  int64_t expert_tensor_rank() const { return stage_rank() % expert_tensor_size; }
  int64_t expert_data_size() const { return tensor_size * data_size / (expert_tensor_size * expert_size); }
  /// The rank within its pipeline stage (tensor ranks fastest), and the rank at these expert coordinates.
  int64_t stage_rank() const { return rank % (tensor_size * data_size); }
  int64_t rank_at_expert(int64_t pipeline_rank, int64_t expert_data_rank, int64_t expert_rank,
                         int64_t expert_tensor_rank) const {
    return pipeline_rank * tensor_size * data_size +
           (expert_data_rank * expert_size + expert_rank) * expert_tensor_size + expert_tensor_rank;
  }
  /// The rank at these coordinates (tensor rank 0 unless given).
  int64_t rank_at(int64_t pipeline_rank, int64_t data_rank, int64_t tensor_rank = 0) const {
    return (pipeline_rank * data_size + data_rank) * tensor_size + tensor_rank;
  }
  /// Ranks with this rank's pipeline and tensor ranks (they all-reduce gradients), in data-rank order.
  std::vector<int64_t> data_group() const;
  /// Ranks that exchange tokens and split the experts (this rank's pipeline, expert tensor and expert-data ranks),
  /// in expert-rank order.
  std::vector<int64_t> expert_group() const;
  /// Ranks holding the same experts (this rank's pipeline, expert tensor and expert ranks): they average the
  /// experts' gradients, in expert-data-rank order.
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
  /// Whether this rank's parameters go into a checkpoint: the first expert-data rank's (each share of the experts) and
  /// the first data rank's (each tensor part); the others hold copies of those.
  bool joins_checkpoint() const { return expert_data_rank() == 0 || data_rank() == 0; }
  /// Whether each expert is split over the tensor ranks as the dense layers are (expert tensor size = tensor size).
  bool splits_experts_over_tensor_ranks() const { return expert_tensor_size == tensor_size; }
  /// Whether this rank holds the embedding (first stage) or the loss (last stage).
  bool holds_embedding() const { return pipeline_rank() == 0; }
  bool holds_loss() const { return pipeline_rank() == pipeline_size - 1; }
};

/// The layout of `rank` under a resolved configuration (its parallel sizes already validated).
ParallelLayout make_parallel_layout(const config::RunConfig& config, int64_t rank);

}  // namespace graphed::dist
