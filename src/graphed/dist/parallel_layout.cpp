// dist/parallel_layout.cpp — see dist/parallel_layout.h.
#include "graphed/dist/parallel_layout.h"

#include "graphed/util/error.h"

namespace graphed::dist {

std::vector<int64_t> ParallelLayout::data_group() const {
  std::vector<int64_t> ranks;
  for (int64_t d = 0; d < data_size; ++d) ranks.push_back(rank_at(pipeline_rank(), d, tensor_rank()));
  return ranks;
}

std::vector<int64_t> ParallelLayout::expert_group() const {
  std::vector<int64_t> ranks;
  for (int64_t e = 0; e < expert_size; ++e) {
    ranks.push_back(rank_at_expert(pipeline_rank(), expert_data_rank(), e, expert_tensor_rank()));
  }
  return ranks;
}

std::vector<int64_t> ParallelLayout::expert_data_group() const {
  std::vector<int64_t> ranks;
  for (int64_t d = 0; d < expert_data_size(); ++d) {
    ranks.push_back(rank_at_expert(pipeline_rank(), d, expert_rank(), expert_tensor_rank()));
  }
  return ranks;
}

std::vector<int64_t> ParallelLayout::pipeline_group() const {
  std::vector<int64_t> ranks;
  for (int64_t p = 0; p < pipeline_size; ++p) ranks.push_back(rank_at(p, data_rank(), tensor_rank()));
  return ranks;
}

std::vector<int64_t> ParallelLayout::tensor_group() const {
  std::vector<int64_t> ranks;
  for (int64_t t = 0; t < tensor_size; ++t) ranks.push_back(rank_at(pipeline_rank(), data_rank(), t));
  return ranks;
}

ModelChunk ParallelLayout::chunk(int64_t pipeline_rank, int64_t c) const {
  const int64_t stages = pipeline_size * chunks;
  const int64_t per_stage = num_layers / stages;
  const int64_t stage = virtual_stage(pipeline_rank, c);
  ModelChunk result;
  result.first_layer = stage * per_stage;
  result.layer_count = per_stage;
  result.first_stage = stage == 0;
  result.last_stage = stage == stages - 1;
  return result;
}

ParallelLayout make_parallel_layout(const config::RunConfig& config, int64_t rank) {
  const config::TrainConfig& t = config.train;
  ParallelLayout layout;
  layout.world_size = t.world_size;
  layout.rank = rank;
  layout.tensor_size = t.tensor_model_parallel_size;
  layout.pipeline_size = t.pipeline_model_parallel_size;
  layout.data_size = t.data_parallel_size.value_or(1);
  layout.expert_size = t.expert_model_parallel_size;
  layout.expert_tensor_size = t.expert_tensor_parallel_size.value_or(layout.tensor_size);
  layout.num_layers = config.model.num_layers;
  const int64_t per_stage = layout.num_layers / layout.pipeline_size;
  if (t.num_layers_per_virtual_pipeline_stage) layout.chunks = per_stage / *t.num_layers_per_virtual_pipeline_stage;
  GRAPHED_INTERNAL_ASSERT(
      layout.tensor_size * layout.pipeline_size * layout.data_size == layout.world_size && rank < layout.world_size &&
          (layout.tensor_size * layout.data_size) % (layout.expert_tensor_size * layout.expert_size) == 0 &&
          (layout.expert_tensor_size == 1 || layout.expert_tensor_size == layout.tensor_size) &&
          layout.num_layers % (layout.pipeline_size * layout.chunks) == 0,
      "unvalidated layout: world ", layout.world_size, " tensor ", layout.tensor_size, " pipeline ",
      layout.pipeline_size, " data ", layout.data_size, " expert ", layout.expert_size, " layers ", layout.num_layers);
  return layout;
}

}  // namespace graphed::dist
