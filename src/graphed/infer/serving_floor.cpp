// infer/serving_floor.cpp — see infer/serving_floor.h.
#include "graphed/infer/serving_floor.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "graphed/infer/decode_roofline.h"
#include "graphed/util/error.h"

namespace graphed::infer {

int64_t decode_steps_at_once(const std::vector<int64_t>& output_lengths, int64_t max_requests) {
  GRAPHED_INTERNAL_ASSERT(max_requests >= 1, "max requests ", max_requests);
  // The steps at which the running requests end; a waiting request starts when the earliest ends.
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> ends;
  int64_t last = 0;
  for (const int64_t output : output_lengths) {
    int64_t start = 0;
    if (static_cast<int64_t>(ends.size()) == max_requests) {
      start = ends.top();
      ends.pop();
    }
    const int64_t end = start + std::max<int64_t>(0, output - 1);
    ends.push(end);
    last = std::max(last, end);
  }
  return last;
}

ServingFloor serving_floor(model::GptModel& model, const std::vector<int64_t>& prompt_lengths,
                           const std::vector<int64_t>& output_lengths, int64_t max_requests, double peak_flops,
                           double bandwidth) {
  // Active parameters: a token runs top-k of each MoE layer's routed experts (the router and a shared expert
  // run for every token).
  const config::ModelConfig& config = model->config();
  const double expert_share = config.is_moe() ? static_cast<double>(config.moe_router_topk) /
                                                    static_cast<double>(config.num_experts.value_or(1))
                                              : 1.0;
  double parameters = 0;
  for (const auto& item : model->named_parameters()) {
    if (item.key() == "word_embeddings" || item.key() == "position_embeddings") continue;
    const bool routed_expert = item.key().find(".moe.experts_") != std::string::npos;
    parameters += static_cast<double>(item.value().numel()) * (routed_expert ? expert_share : 1.0);
  }
  double tokens = 0;
  double cached_positions = 0;  // summed over the decode steps of every request
  for (std::size_t i = 0; i < prompt_lengths.size(); ++i) {
    const auto prompt = static_cast<double>(prompt_lengths[i]);
    const auto output = static_cast<double>(output_lengths[i]);
    tokens += prompt + output;
    // Decode step k (1..output - 1) reads the prompt and the k tokens drawn before it.
    cached_positions += (output - 1) * prompt + (output - 1) * output / 2;
  }
  ServingFloor floor;
  floor.decode_steps = decode_steps_at_once(output_lengths, max_requests);
  const double weight_bytes = decode_bytes_per_step(model, 0, 0);
  const double bytes_per_position = decode_bytes_per_step(model, 1, 1) - decode_bytes_per_step(model, 1, 0);
  floor.compute_seconds = 2.0 * parameters * tokens / peak_flops;
  floor.memory_seconds =
      (static_cast<double>(floor.decode_steps) * weight_bytes + cached_positions * bytes_per_position) / bandwidth;
  return floor;
}

}  // namespace graphed::infer
