// tests/infer/serving_engine_cuda_test.cpp — the serving engine's graphs on the GPU: at scope layer and
// block, a run of 20 requests (prompts of 1 to 100 tokens, 1 to 30 new tokens, a third of them sampled
// with top-k and top-p, joining in three waves and leaving as they finish) takes the same steps, draws
// the same tokens and leaves the same keys, values and Mamba states, bit for bit, as the eager engine
// (scope none) over the same padded shapes; for a Llama-style bf16 model (mixed prefill and decode
// graphs), a GPT-2-style one and a Mamba hybrid (decode-only graphs, matched strictly). A tokenizer
// of 300 ids over the model's 512: no padded id is ever drawn. Also: capture_graphs() captures every
// bucket, and the blocks all come back; and with issue 45's log probabilities, penalties, bias, min-p and token
// constraints mixed in (masked steps split before sampling), graphed equals eager bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "cuda_test.h"
#include "graphed/infer/draft_proposer.h"
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

/// The workload with every other prompt a passage given twice and started a third time, so that prompt lookup hits.
Workload repetitive_workload() {
  Workload work = workload();
  for (std::size_t i = 0; i < work.prompts.size(); i += 2) {
    const auto length = static_cast<std::ptrdiff_t>(std::min<std::size_t>(work.prompts[i].size(), 24));
    std::vector<int64_t> passage(work.prompts[i].begin(), work.prompts[i].begin() + length);
    std::vector<int64_t> quoted = passage;
    quoted.insert(quoted.end(), passage.begin(), passage.end());
    quoted.insert(quoted.end(), passage.begin(), passage.begin() + static_cast<std::ptrdiff_t>(passage.size() / 2));
    work.prompts[i] = quoted;
  }
  return work;
}

/// Speculation (issue 46): verification rows replayed from decode graphs take the eager engine's steps and draw its
/// tokens bit for bit, none of them eager for want of a graph beyond the unmatched ones.
TEST_P(ServingEngineCudaTest, SpeculationInGraphsEqualsEagerBitwise) {
  if (GetParam().style == Style::kHybrid) GTEST_SKIP() << "hybrid models refuse speculation";
  model::GptModel model = cuda_model(GetParam().style);
  const Workload work = repetitive_workload();
  const auto options = [&](InferenceCudaGraphScope scope, bool speculate) {
    ServingOptions result = engine_options(scope);
    if (speculate) {
      result.speculation.method = SpeculativeDecoding::Method::kNgram;
      result.speculation.num_tokens = 4;
      result.speculation.lookup = {4, 3, 1};
      result.speculation.governed = false;  // the same steps in both engines, whatever their speed
    }
    return result;
  };
  ServingEngine plain(model, at::Device(at::kCUDA), options(GetParam().scope, false));
  const RunRecord without = run(plain, work);
  ServingEngine eager(model, at::Device(at::kCUDA), options(InferenceCudaGraphScope::kNone, true));
  const RunRecord reference = run(eager, work);
  ServingEngine graphed(model, at::Device(at::kCUDA), options(GetParam().scope, true));
  const RunRecord replayed = run(graphed, work);
  EXPECT_EQ(replayed.steps, reference.steps);
  ASSERT_EQ(replayed.tokens.size(), work.prompts.size());
  EXPECT_EQ(replayed.tokens, reference.tokens);
  expect_same_cache(eager.cache(), graphed.cache());
  EXPECT_GT(replayed.stats.accepted_tokens, 0);
  EXPECT_GT(replayed.stats.graph_steps, 0);
  EXPECT_EQ(replayed.stats.graph_steps + replayed.stats.unmatched_steps, replayed.stats.steps);
  EXPECT_EQ(graphed.blocks_in_use(), 0);
  int64_t same = 0, total = 0;
  for (const auto& [id, tokens] : replayed.tokens) {
    const std::vector<int64_t>& alone = without.tokens.at(id);
    for (std::size_t t = 0; t < tokens.size() && t < alone.size(); ++t) same += tokens[t] == alone[t] ? 1 : 0;
    total += static_cast<int64_t>(tokens.size());
  }
  std::cout << "speculation: " << replayed.stats.verifications << " verifications, " << replayed.stats.accepted_tokens
            << " of " << replayed.stats.draft_tokens << " proposed tokens kept; steps " << replayed.stats.steps
            << " (without speculation " << without.stats.steps << "), graphed " << replayed.stats.graph_steps
            << ", unmatched " << replayed.stats.unmatched_steps << "; tokens equal to the run without speculation at "
            << "the same place: " << same << " of " << total << " (bf16: a verification's batch differs)\n";
}

/// Speculation with a draft model: the draft's engine and the target's, both replayed from graphs, take the eager
/// engines' steps and draw their tokens bit for bit; neither runs a step eagerly for want of a graph.
TEST_P(ServingEngineCudaTest, DraftModelSpeculationInGraphsEqualsEagerBitwise) {
  if (GetParam().style == Style::kHybrid) GTEST_SKIP() << "hybrid models refuse speculation";
  model::GptModel model = cuda_model(GetParam().style);
  testing::TestModelShape shape;  // a one-layer draft of the target's vocabulary
  shape.layers = 1;
  shape.hidden = 64;
  shape.vocab = 512;
  shape.sequence = 160;
  shape.seed = 9;
  const model::GptModel draft = testing::test_model(Style::kGpt2, shape, at::kBFloat16, at::Device(at::kCUDA));
  const Workload work = repetitive_workload();
  const auto options = [&](InferenceCudaGraphScope scope) {
    ServingOptions result = engine_options(scope);
    result.speculation.method = SpeculativeDecoding::Method::kDraftModel;
    result.speculation.num_tokens = 3;
    result.speculation.governed = false;
    result.speculation.draft =
        std::make_shared<DraftModelProposer>(draft, at::Device(at::kCUDA), result, result.vocabulary);
    return result;
  };
  const ServingOptions eager_options = options(InferenceCudaGraphScope::kNone);
  ServingEngine eager(model, at::Device(at::kCUDA), eager_options);
  const RunRecord reference = run(eager, work);
  const ServingOptions graphed_options = options(GetParam().scope);
  ServingEngine graphed(model, at::Device(at::kCUDA), graphed_options);
  const RunRecord replayed = run(graphed, work);
  EXPECT_EQ(replayed.steps, reference.steps);
  EXPECT_EQ(replayed.tokens, reference.tokens);
  expect_same_cache(eager.cache(), graphed.cache());
  EXPECT_GT(replayed.stats.verifications, 0);
  EXPECT_EQ(replayed.stats.graph_steps + replayed.stats.unmatched_steps, replayed.stats.steps);
  const ProposerWork drafted = graphed_options.speculation.draft->work();
  EXPECT_GT(drafted.steps, 0);
  if (GetParam().scope != InferenceCudaGraphScope::kNone) EXPECT_EQ(drafted.eager_steps, 0);
  EXPECT_EQ(graphed.blocks_in_use(), 0);
  std::cout << "draft model: " << replayed.stats.verifications << " verifications, " << replayed.stats.accepted_tokens
            << " of " << replayed.stats.draft_tokens << " proposed tokens kept; target steps " << replayed.stats.steps
            << " (graphed " << replayed.stats.graph_steps << "), draft steps " << drafted.steps << " in "
            << drafted.rounds << " rounds\n";
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

/// Allows the tokens below 300 whose id leaves draw i's remainder modulo 3, and is complete after `length`.
class ModuloConstraint final : public TokenConstraint {
 public:
  explicit ModuloConstraint(int64_t length) : length_(length) {}
  void allowed(std::uint32_t* words, std::int64_t word_count) override {
    std::fill(words, words + word_count, 0U);
    for (int64_t token = drawn_ % 3; token < 300; token += 3) words[token / 32] |= 1U << (token % 32);
  }
  void accept(std::int64_t token) override {
    EXPECT_EQ(token % 3, drawn_ % 3) << "draw " << drawn_;
    ++drawn_;
  }
  bool finished() const override { return drawn_ >= length_; }

 private:
  int64_t length_;
  int64_t drawn_ = 0;
};

/// The workload with issue 45's features mixed in: log probabilities, penalties and bias, min-p, constraints (made
/// afresh for each run: they keep state).
Workload featured_workload() {
  Workload work = workload();
  for (std::size_t i = 0; i < work.options.size(); ++i) {
    RequestOptions& options = work.options[i];
    if (i % 4 == 0) options.logprobs = 5;
    if (i % 5 == 1) {
      options.controls.presence_penalty = 0.5;
      options.controls.frequency_penalty = 0.25;
      options.controls.repetition_penalty = 1.2;
      options.controls.logit_bias = {{17, 3.0}, {18, -100.0}};
    }
    if (i % 7 == 3) {
      options.sampling.temperature = 1.1;
      options.sampling.min_p = 0.05;
      options.sampling.seed = 500 + i;
    }
    if (i % 6 == 2) options.constraint = std::make_shared<ModuloConstraint>(options.max_new_tokens);
  }
  return work;
}

/// Every token event's id and log probabilities, by request, through `run`.
std::map<int64_t, std::vector<std::vector<double>>> run_events(ServingEngine& engine, const Workload& work) {
  std::map<int64_t, std::vector<std::vector<double>>> events;
  for (std::size_t i = 0; i < work.prompts.size(); ++i) engine.add_request(work.prompts[i], work.options[i]);
  for (int step = 0; engine.has_work() && step < 2000; ++step) {
    const StepResult done = engine.step();
    for (const auto& event : done.tokens) {
      std::vector<double> record{static_cast<double>(event.token)};
      if (event.logprobs) {
        record.push_back(event.logprobs->logprob);
        for (const auto& [id, value] : event.logprobs->top) record.insert(record.end(), {double(id), value});
      }
      events[event.request].push_back(record);
    }
    for (const auto& finished : done.finished) EXPECT_NE(finished.reason, FinishReason::kRejected) << finished.message;
  }
  return events;
}

TEST_P(ServingEngineCudaTest, ControlsMasksAndLogprobsInGraphsEqualEagerBitwise) {
  model::GptModel model = cuda_model(GetParam().style);
  ServingEngine eager(model, at::Device(at::kCUDA), engine_options(InferenceCudaGraphScope::kNone));
  const auto reference = run_events(eager, featured_workload());
  ServingEngine graphed(model, at::Device(at::kCUDA), engine_options(GetParam().scope));
  const auto replayed = run_events(graphed, featured_workload());
  EXPECT_EQ(replayed, reference);
  EXPECT_GT(graphed.stats().graph_steps, 0);
  EXPECT_GT(graphed.stats().masked_steps, 0);
  EXPECT_EQ(graphed.blocks_in_use(), 0);
  std::cout << "steps " << graphed.stats().steps << ", graphed " << graphed.stats().graph_steps << ", masked "
            << graphed.stats().masked_steps << ", graphs " << graphed.graph_count() << "\n";
}

using ServingEngineMoeCudaTest = graphed::testing::CudaTest;

/// A dropless MoE model through --moe-grouped-gemm (issue 47): its serving graphs at either scope take the eager
/// engine's steps and draw its tokens bit for bit.
TEST_F(ServingEngineMoeCudaTest, GroupedDroplessMoeInGraphsEqualsEagerBitwise) {
  at::manual_seed(9);
  const auto config = testing::run_config({{"num_layers", 2},
                                           {"hidden_size", 128},
                                           {"num_attention_heads", 4},
                                           {"vocab_size", 512},
                                           {"seq_length", 160},
                                           {"attention_dropout", 0.0},
                                           {"hidden_dropout", 0.0},
                                           {"num_experts", 8},
                                           {"moe_router_topk", 2},
                                           {"moe_ffn_hidden_size", 96},
                                           {"moe_grouped_gemm", true}});
  model::GptModel model(config.model, config.moe_layers);
  model->to(at::Device(at::kCUDA), at::kBFloat16);
  model->eval();
  const Workload work = workload();
  ServingEngine eager(model, at::Device(at::kCUDA), engine_options(InferenceCudaGraphScope::kNone));
  const RunRecord reference = run(eager, work);
  for (const InferenceCudaGraphScope scope : {InferenceCudaGraphScope::kBlock, InferenceCudaGraphScope::kLayer}) {
    SCOPED_TRACE(config::to_string(scope));
    ServingEngine graphed(model, at::Device(at::kCUDA), engine_options(scope));
    const RunRecord replayed = run(graphed, work);
    EXPECT_EQ(replayed.steps, reference.steps);
    EXPECT_EQ(replayed.tokens, reference.tokens);
    expect_same_cache(eager.cache(), graphed.cache());
    EXPECT_GT(replayed.stats.graph_steps, 0);
  }
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
