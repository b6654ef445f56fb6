// infer/serving_floor.h — the least time a serving workload can take on a GPU (a floor for the engine's
// work, not a promise): the model's matmul FLOPs over every prompt and output token at the GPU's dense peak
// (with an MoE, the active parameters: top-k of each layer's routed experts), plus the bytes the decode steps
// must read (every weight once a step, each running request's cached keys and values) at its memory
// bandwidth. bench --serve divides it by the measured time (floor_share).
#pragma once

#include <cstdint>
#include <vector>

#include "graphed/model/gpt_model.h"

namespace graphed::infer {

struct ServingFloor {
  double compute_seconds = 0;  ///< 2 x active parameters outside the embedding x (prompt + output tokens) / peak FLOP/s
  double memory_seconds = 0;   ///< (decode steps x weight bytes + KV bytes the decode steps read) / bandwidth
  int64_t decode_steps = 0;    ///< steps after every request's first token, up to max requests at once
  double seconds() const { return compute_seconds + memory_seconds; }
};

/// Decode steps of requests that all arrive at once and run up to `max_requests` at a time, in order, each for
/// output - 1 steps after its first token (drawn by its prompt's step): the list schedule's length.
int64_t decode_steps_at_once(const std::vector<int64_t>& output_lengths, int64_t max_requests);

/// The floor of a workload of requests (prompt_lengths[i] tokens, output_lengths[i] new tokens) on a GPU of
/// `peak_flops` dense FLOP/s (bf16) and `bandwidth` bytes/s.
ServingFloor serving_floor(model::GptModel& model, const std::vector<int64_t>& prompt_lengths,
                           const std::vector<int64_t>& output_lengths, int64_t max_requests, double peak_flops,
                           double bandwidth);

}  // namespace graphed::infer
