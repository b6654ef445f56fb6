// tests/infer/served_run.h — the speculation tests' run of a CPU serving engine to its end: each prompt's drawn tokens
// (a refused request fails the test), the engine's stats and the blocks it still holds, and the request options
// those tests build.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "graphed/infer/serving_engine.h"

namespace graphed::testing {

struct ServedRun {
  std::vector<std::vector<int64_t>> tokens;  // by prompt
  infer::EngineStats stats;
  int64_t blocks_in_use = 0;
};

inline infer::RequestOptions sampling_request(int64_t new_tokens, double temperature, uint64_t seed) {
  infer::RequestOptions options;
  options.max_new_tokens = new_tokens;
  options.sampling.temperature = temperature;
  options.sampling.seed = seed;
  return options;
}

inline ServedRun serve_to_end(model::GptModel& model, const infer::ServingOptions& options,
                              const std::vector<std::vector<int64_t>>& prompts,
                              const std::vector<infer::RequestOptions>& requests) {
  infer::ServingEngine engine(model, at::Device(at::kCPU), options);
  std::vector<int64_t> ids;
  for (std::size_t i = 0; i < prompts.size(); ++i) ids.push_back(engine.add_request(prompts[i], requests[i]));
  std::map<int64_t, std::vector<int64_t>> finished;
  for (int guard = 0; engine.has_work() && guard < 100000; ++guard) {
    for (auto& done : engine.step().finished) {
      EXPECT_NE(done.reason, infer::FinishReason::kRejected) << done.message;
      finished[done.request] = done.tokens;
    }
  }
  ServedRun served;
  for (const int64_t id : ids) served.tokens.push_back(finished[id]);
  served.stats = engine.stats();
  served.blocks_in_use = engine.blocks_in_use();
  return served;
}

}  // namespace graphed::testing
