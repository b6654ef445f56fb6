// tests/infer/serving_engine_cuda_test.cpp — the serving engine's graphs on the GPU: at scope layer and
// block, a run of 20 requests (prompts of 1 to 100 tokens, 1 to 30 new tokens, a third of them sampled
// with top-k and top-p, joining in three waves and leaving as they finish) takes the same steps, draws
// the same tokens and leaves the same keys, values and Mamba states, bit for bit, as the eager engine
// (scope none) over the same padded shapes; for a Llama-style bf16 model (mixed prefill and decode
// graphs), a GPT-2-style one and a Mamba hybrid (decode-only graphs, matched strictly). A tokenizer
// of 300 ids over the model's 512: no padded id is ever drawn. Also: capture_graphs() captures every
// bucket, and the blocks all come back.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <random>
#include <set>

#include "cuda_test.h"
#include "graphed/infer/serving_engine.h"
#include "test_models.h"

namespace graphed::infer {
namespace {

using config::InferenceCudaGraphScope;

using Style = testing::ModelStyle;

model::GptModel cuda_model(Style style) { return testing::gpu_test_model(style, 160); }

ServingOptions engine_options(InferenceCudaGraphScope scope) {
  ServingOptions options;
  options.scope = scope;
  options.max_requests = 8;
  options.max_tokens = 256;
  options.block_size = 16;
  options.cuda_graph_max_tokens = 64;
  options.num_cuda_graphs = 8;
  options.vocabulary = 300;
  options.buffer_size_gb = 0.05;
  return options;
}

struct Workload {
  std::vector<std::vector<int64_t>> prompts;
  std::vector<RequestOptions> options;
};

Workload workload() {
  std::mt19937 random(42);
  Workload work;
  for (int i = 0; i < 20; ++i) {
    const int64_t length = std::uniform_int_distribution<int64_t>(1, 100)(random);
    std::vector<int64_t> prompt(static_cast<std::size_t>(length));
    for (auto& id : prompt) id = std::uniform_int_distribution<int64_t>(0, 299)(random);
    RequestOptions options;
    options.max_new_tokens = std::uniform_int_distribution<int64_t>(1, 30)(random);
    if (i % 3 == 1) {
      options.sampling.temperature = 0.9;
      options.sampling.top_k = i % 2 == 0 ? 40 : 0;
      options.sampling.top_p = 0.95;
      options.sampling.seed = 1000 + static_cast<uint64_t>(i);
    }
    work.prompts.push_back(std::move(prompt));
    work.options.push_back(options);
  }
  return work;
}

struct RunRecord {
  std::map<int64_t, std::vector<int64_t>> tokens;
  std::vector<std::string> steps;  // each step's real and padded dimensions
  std::set<std::string> matched;
  EngineStats stats;
};

/// 8 requests at first, 4 more after step 3, the rest after step 10.
RunRecord run(ServingEngine& engine, const Workload& work) {
  RunRecord result;
  std::size_t added = 0;
  const auto add_until = [&](std::size_t count) {
    for (; added < count; ++added) engine.add_request(work.prompts[added], work.options[added]);
  };
  add_until(8);
  for (int step = 0; (engine.has_work() || added < work.prompts.size()) && step < 2000; ++step) {
    if (step == 3) add_until(12);
    if (step == 10) add_until(work.prompts.size());
    const StepResult done = engine.step();
    result.steps.push_back(done.real.describe() + " as " + done.padded.describe());
    if (done.matched) result.matched.insert(done.padded.describe());
    for (const auto& finished : done.finished) {
      EXPECT_NE(finished.reason, FinishReason::kRejected) << finished.message;
      result.tokens[finished.request] = finished.tokens;
    }
  }
  result.stats = engine.stats();
  return result;
}

/// Every block but the padding block 0, every state slot but the padding slot 0.
void expect_same_cache(const PagedCache& a, const PagedCache& b) {
  ASSERT_EQ(a.layers().size(), b.layers().size());
  for (std::size_t i = 0; i < a.layers().size(); ++i) {
    const auto& x = a.layers()[i];
    const auto& y = b.layers()[i];
    for (const auto& [p, q] : {std::make_pair(x.key, y.key), std::make_pair(x.value, y.value),
                               std::make_pair(x.conv_state, y.conv_state), std::make_pair(x.ssm_state, y.ssm_state)}) {
      if (!p.defined()) continue;
      EXPECT_TRUE(at::equal(p.narrow(0, 1, p.size(0) - 1), q.narrow(0, 1, q.size(0) - 1))) << "layer " << i;
    }
  }
}

struct Param {
  Style style;
  InferenceCudaGraphScope scope;
};

using ServingEngineCudaTest = graphed::testing::CudaTestWithParam<Param>;

TEST_P(ServingEngineCudaTest, GraphedEqualsEagerBitwiseAsRequestsJoinAndLeave) {
  model::GptModel model = cuda_model(GetParam().style);
  const Workload work = workload();
  ServingEngine eager(model, at::Device(at::kCUDA), engine_options(InferenceCudaGraphScope::kNone));
  const RunRecord reference = run(eager, work);
  ServingEngine graphed(model, at::Device(at::kCUDA), engine_options(GetParam().scope));
  const RunRecord replayed = run(graphed, work);
  EXPECT_EQ(replayed.steps, reference.steps);
  ASSERT_EQ(replayed.tokens.size(), work.prompts.size());
  EXPECT_EQ(replayed.tokens, reference.tokens);
  for (const auto& [id, tokens] : replayed.tokens) {
    for (const int64_t token : tokens) EXPECT_LT(token, 300) << "request " << id << " drew a padded id";
  }
  expect_same_cache(eager.cache(), graphed.cache());
  EXPECT_GT(replayed.stats.graph_steps, 0);
  EXPECT_EQ(replayed.stats.graph_steps + replayed.stats.unmatched_steps, replayed.stats.steps);
  EXPECT_EQ(graphed.blocks_in_use(), 0);
  std::cout << "steps " << replayed.stats.steps << ", graphed " << replayed.stats.graph_steps << ", unmatched (eager) "
            << replayed.stats.unmatched_steps << ", buckets used " << replayed.matched.size() << " of "
            << graphed.buckets().size() << ", graphs " << graphed.graph_count() << "\n";
  if (GetParam().style == Style::kHybrid) {
    for (const auto& bucket : graphed.buckets()) EXPECT_EQ(bucket.prefill_count, 0) << bucket.describe();
  }
}

TEST_P(ServingEngineCudaTest, CapturesEveryBucket) {
  model::GptModel model = cuda_model(GetParam().style);
  ServingEngine engine(model, at::Device(at::kCUDA), engine_options(GetParam().scope));
  engine.capture_graphs();
  const int64_t per_bucket =
      GetParam().scope == InferenceCudaGraphScope::kBlock ? 1 : 3 + (GetParam().style == Style::kHybrid);
  EXPECT_EQ(engine.graph_count(), per_bucket * static_cast<int64_t>(engine.buckets().size()));
  std::cout << engine.buckets().size() << " buckets captured in " << engine.stats().capture_seconds << " s\n";
}

INSTANTIATE_TEST_SUITE_P(Styles, ServingEngineCudaTest,
                         ::testing::Values(Param{Style::kLlama, InferenceCudaGraphScope::kBlock},
                                           Param{Style::kLlama, InferenceCudaGraphScope::kLayer},
                                           Param{Style::kGpt2, InferenceCudaGraphScope::kBlock},
                                           Param{Style::kHybrid, InferenceCudaGraphScope::kBlock},
                                           Param{Style::kHybrid, InferenceCudaGraphScope::kLayer}),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           const char* style = info.param.style == Style::kLlama  ? "llama"
                                               : info.param.style == Style::kGpt2 ? "gpt2"
                                                                                  : "hybrid";
                           return std::string(style) + "_" + config::to_string(info.param.scope);
                         });

}  // namespace
}  // namespace graphed::infer
