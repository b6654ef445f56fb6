// tests/infer/serving_engine_test.cpp — the serving engine on the CPU (scope none) with small float64
// models: every request's greedy tokens equal a full recompute whatever shares its steps (more requests
// than the engine holds at once, chunked prompts, padded and unpadded steps, preemption in a small
// cache), sampled requests repeat with their seeds in any company, stop tokens and cancellation end
// requests, bad requests are refused alone, every block comes back, and the choices of one prompt reuse its
// keys and values (the n of an OpenAI request) and draw what they draw alone.
#include "graphed/infer/serving_engine.h"

#include <gtest/gtest.h>

#include <map>

#include <ATen/core/grad_mode.h>

#include "graphed/util/error.h"
#include "test_models.h"

namespace graphed::infer {
namespace {

using Kind = testing::ModelStyle;

model::GptModel small_model(Kind kind) { return testing::cpu_test_model(kind); }

using testing::recompute_greedy;

ServingOptions small_engine() {
  ServingOptions options;
  options.max_requests = 3;
  options.max_tokens = 12;  // prompts longer than what a step has left run in chunks
  options.block_size = 4;
  options.cuda_graph_max_tokens = 8;
  return options;
}

RequestOptions greedy(int64_t new_tokens) {
  RequestOptions options;
  options.max_new_tokens = new_tokens;
  return options;
}

RequestOptions sampled(uint64_t seed, int64_t new_tokens) {
  RequestOptions options;
  options.max_new_tokens = new_tokens;
  options.sampling.temperature = 1.3;
  options.sampling.top_k = 20;
  options.sampling.top_p = 0.9;
  options.sampling.seed = seed;
  return options;
}

/// Runs until every request ends; returns the finished requests by id.
std::map<int64_t, FinishedRequest> run_all(ServingEngine& engine, EngineStats* stats = nullptr) {
  std::map<int64_t, FinishedRequest> finished;
  for (int guard = 0; engine.has_work() && guard < 10000; ++guard) {
    for (auto& done : engine.step().finished) finished[done.request] = done;
  }
  if (stats) *stats = engine.stats();
  return finished;
}

const std::vector<std::vector<int64_t>> kPrompts{
    {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, {9}, {10, 20, 30}, {5, 6, 7, 8, 9}, {40, 41}};

class ServingEngineModels : public ::testing::TestWithParam<Kind> {};

TEST_P(ServingEngineModels, GreedyEqualsRecomputeForMoreRequestsThanTheEngineHolds) {
  model::GptModel model = small_model(GetParam());
  ServingEngine engine(model, at::Device(at::kCPU), small_engine());
  std::vector<int64_t> ids;
  for (std::size_t i = 0; i < kPrompts.size(); ++i)
    ids.push_back(engine.add_request(kPrompts[i], greedy(6 + static_cast<int64_t>(i))));
  EngineStats stats;
  const auto finished = run_all(engine, &stats);
  ASSERT_EQ(finished.size(), kPrompts.size());
  for (std::size_t i = 0; i < kPrompts.size(); ++i) {
    const FinishedRequest& done = finished.at(ids[i]);
    EXPECT_EQ(done.reason, FinishReason::kLength);
    EXPECT_EQ(done.tokens, recompute_greedy(model, kPrompts[i], 6 + static_cast<int64_t>(i))) << "request " << i;
  }
  EXPECT_EQ(engine.blocks_in_use(), 0);
  if (GetParam() == Kind::kHybrid) {
    EXPECT_GT(stats.unmatched_steps, 0);  // decode-only graphs: the prompt steps run eagerly at their own size
  } else {
    // Steps hold at most the largest bucket's 8 tokens (the 13-token prompt runs in chunks), so every step has one.
    EXPECT_EQ(engine.step_token_limit(), 8);
    EXPECT_EQ(stats.unmatched_steps, 0);
  }
  EXPECT_EQ(stats.output_tokens, 6 + 7 + 8 + 9 + 10);
}

TEST_P(ServingEngineModels, PreemptionInASmallCacheKeepsEveryRequestsTokens) {
  model::GptModel model = small_model(GetParam());
  ServingOptions options = small_engine();
  options.max_tokens = 16;
  // Room for 7 usable blocks of 4 positions: three requests of up to 20 positions do not fit together.
  options.buffer_size_gb = static_cast<double>(8 * bytes_per_block(model, 4, at::TensorOptions().dtype(at::kDouble))) /
                           (1024.0 * 1024.0 * 1024.0);
  ServingEngine engine(model, at::Device(at::kCPU), options);
  ASSERT_EQ(engine.blocks_total(), 7);
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(engine.add_request(kPrompts[static_cast<std::size_t>(i)], greedy(7)));
  EngineStats stats;
  const auto finished = run_all(engine, &stats);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(finished.at(ids[static_cast<std::size_t>(i)]).tokens,
              recompute_greedy(model, kPrompts[static_cast<std::size_t>(i)], 7))
        << i;
  }
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_EQ(engine.blocks_in_use(), 0);
}

/// Async scheduling launches each step before the last one's tokens are read; every request must draw what it draws
/// when the engine waits for each step: sampled and greedy, stop tokens (a token computed past the stop is dropped),
/// and preemptions in a small cache.
TEST_P(ServingEngineModels, AsyncSchedulingDrawsWhatWaitingForEveryStepDraws) {
  model::GptModel model = small_model(GetParam());
  const auto run = [&](bool async) {
    ServingOptions options = small_engine();
    options.async_scheduling = async;
    options.max_tokens = 16;
    options.buffer_size_gb =
        static_cast<double>(9 * bytes_per_block(model, 4, at::TensorOptions().dtype(at::kDouble))) /
        (1024.0 * 1024.0 * 1024.0);
    ServingEngine engine(model, at::Device(at::kCPU), options);
    std::vector<int64_t> ids;
    for (std::size_t i = 0; i < kPrompts.size(); ++i) {
      RequestOptions request = i % 2 == 0 ? greedy(7) : sampled(40 + i, 9);
      if (i == 0) request.stop_tokens = {recompute_greedy(model, kPrompts[0], 7)[3]};
      ids.push_back(engine.add_request(kPrompts[i], request));
    }
    EngineStats stats;
    auto finished = run_all(engine, &stats);
    EXPECT_EQ(engine.blocks_in_use(), 0);
    std::vector<std::pair<FinishReason, std::vector<int64_t>>> drawn;
    for (const int64_t id : ids) drawn.emplace_back(finished.at(id).reason, finished.at(id).tokens);
    return std::make_pair(drawn, stats);
  };
  const auto [waiting, waiting_stats] = run(false);
  const auto [async, async_stats] = run(true);
  EXPECT_EQ(async, waiting);
  EXPECT_EQ(waiting.front().first, FinishReason::kStopToken);
  EXPECT_EQ(async_stats.output_tokens, waiting_stats.output_tokens);
}

TEST_P(ServingEngineModels, ChoicesOfOnePromptReuseItsKeysAndValuesAndDrawTheirOwnTokens) {
  model::GptModel model = small_model(GetParam());
  for (const int64_t length : {13, 9}) {  // a partial last block is copied; a prompt of whole blocks plus one token
    const std::vector<int64_t> prompt(kPrompts[0].begin(), kPrompts[0].begin() + length);
    ServingEngine alone(model, at::Device(at::kCPU), small_engine());
    const int64_t single = alone.add_request(prompt, sampled(91, 6));
    const auto by_itself = run_all(alone).at(single).tokens;
    ServingEngine engine(model, at::Device(at::kCPU), small_engine());
    const int64_t first = engine.add_request(prompt, greedy(6));
    RequestOptions second = greedy(5);
    second.prompt_of = first;
    RequestOptions third = sampled(91, 6);
    third.prompt_of = first;
    const int64_t greedy_choice = engine.add_request(prompt, second);
    const int64_t sampled_choice = engine.add_request(prompt, third);
    EngineStats stats;
    const auto finished = run_all(engine, &stats);
    const auto expected = recompute_greedy(model, prompt, 6);
    EXPECT_EQ(finished.at(first).tokens, expected);
    EXPECT_EQ(finished.at(greedy_choice).tokens, std::vector<int64_t>(expected.begin(), expected.begin() + 5));
    EXPECT_EQ(finished.at(sampled_choice).tokens, by_itself);
    // The choices compute only the prompt's last token (a hybrid's Mamba states cannot be reused: all of it).
    const bool reused = GetParam() != Kind::kHybrid;
    EXPECT_EQ(stats.prompt_tokens, reused ? length + 2 : 3 * length);
    EXPECT_EQ(stats.shared_prompt_tokens, reused ? 2 * (length - 1) : 0);
    EXPECT_EQ(engine.blocks_in_use(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ServingEngineModels, ::testing::Values(Kind::kLlama, Kind::kGpt2, Kind::kHybrid),
                         [](const ::testing::TestParamInfo<Kind>& info) { return testing::style_name(info.param); });

TEST(ServingEngine, SampledRequestsRepeatWithTheirSeedsInAnyCompany) {
  model::GptModel model = small_model(Kind::kLlama);
  ServingEngine alone(model, at::Device(at::kCPU), small_engine());
  const int64_t single = alone.add_request(kPrompts[2], sampled(77, 10));
  const auto by_itself = run_all(alone).at(single).tokens;
  ServingEngine crowd(model, at::Device(at::kCPU), small_engine());
  crowd.add_request(kPrompts[0], greedy(9));
  crowd.add_request(kPrompts[1], sampled(5, 12));
  const int64_t again = crowd.add_request(kPrompts[2], sampled(77, 10));
  crowd.add_request(kPrompts[3], sampled(78, 4));
  const auto in_company = run_all(crowd);
  EXPECT_EQ(in_company.at(again).tokens, by_itself);
  ServingEngine other_seed(model, at::Device(at::kCPU), small_engine());
  const int64_t different = other_seed.add_request(kPrompts[2], sampled(78, 10));
  EXPECT_NE(run_all(other_seed).at(different).tokens, by_itself);
}

TEST(ServingEngine, StopTokensEndARequestAndTheTokenIsKept) {
  model::GptModel model = small_model(Kind::kGpt2);
  const auto expected = recompute_greedy(model, kPrompts[0], 8);
  ServingEngine engine(model, at::Device(at::kCPU), small_engine());
  RequestOptions options = greedy(8);
  options.stop_tokens = {expected[2]};
  const int64_t id = engine.add_request(kPrompts[0], options);
  const FinishedRequest done = run_all(engine).at(id);
  EXPECT_EQ(done.reason, FinishReason::kStopToken);
  const auto first_stop = std::find(expected.begin(), expected.end(), expected[2]);
  EXPECT_EQ(done.tokens, std::vector<int64_t>(expected.begin(), first_stop + 1));
}

TEST(ServingEngine, BadRequestsAreRefusedAloneWithTheirReasons) {
  model::GptModel model = small_model(Kind::kGpt2);
  ServingEngine engine(model, at::Device(at::kCPU), small_engine());
  const int64_t good = engine.add_request(kPrompts[1], greedy(4));
  const int64_t empty = engine.add_request({}, greedy(4));
  const int64_t unknown = engine.add_request({1, 64, 2}, greedy(4));
  const int64_t too_long = engine.add_request(std::vector<int64_t>(45, 3), greedy(4));
  const auto finished = run_all(engine);
  EXPECT_EQ(finished.at(good).reason, FinishReason::kLength);
  EXPECT_EQ(finished.at(good).tokens, recompute_greedy(model, kPrompts[1], 4));
  for (const int64_t id : {empty, unknown, too_long}) EXPECT_EQ(finished.at(id).reason, FinishReason::kRejected);
  EXPECT_NE(finished.at(empty).message.find("empty"), std::string::npos);
  EXPECT_NE(finished.at(unknown).message.find("token id 64"), std::string::npos);
  EXPECT_NE(finished.at(too_long).message.find("past the context of 48"), std::string::npos);
  // Without chunked prefill a prompt and its recompute after a preemption must fit one step (12 tokens).
  ServingOptions whole = small_engine();
  whole.chunked_prefill = false;
  ServingEngine unchunked(model, at::Device(at::kCPU), whole);
  const int64_t fits = unchunked.add_request(std::vector<int64_t>(9, 3), greedy(4));
  const int64_t too_big = unchunked.add_request(std::vector<int64_t>(10, 3), greedy(4));
  const auto done = run_all(unchunked);
  EXPECT_EQ(done.at(fits).reason, FinishReason::kLength);
  EXPECT_EQ(done.at(too_big).reason, FinishReason::kRejected);
  EXPECT_NE(done.at(too_big).message.find("with chunked prefill off"), std::string::npos) << done.at(too_big).message;
}

/// Each refusal names the part of the request at fault, and its remedy is one that fits: never "shorten the
/// prompt to at most 0 tokens" when the new tokens alone fill the context of 48.
TEST(ServingEngine, ARefusalNamesThePartAtFaultAndARemedyThatFits) {
  model::GptModel model = small_model(Kind::kGpt2);
  ServingEngine engine(model, at::Device(at::kCPU), small_engine());
  const auto refusal = [&](std::vector<int64_t> prompt, RequestOptions options) {
    const auto found = engine.rejection(prompt, options);
    EXPECT_TRUE(found.has_value());
    return found.value_or(Rejection{});
  };
  const Rejection a_little_long = refusal(std::vector<int64_t>(45, 3), greedy(4));
  EXPECT_EQ(a_little_long.part, RejectedPart::kMaxNewTokens);
  EXPECT_EQ(a_little_long.remedy, "ask for at most 3 new tokens, or shorten the prompt to at most 44 tokens");
  const Rejection too_many_new = refusal(std::vector<int64_t>(10, 3), greedy(60));
  EXPECT_EQ(too_many_new.part, RejectedPart::kMaxNewTokens);
  EXPECT_EQ(too_many_new.remedy, "ask for at most 38 new tokens");
  const Rejection prompt_alone = refusal(std::vector<int64_t>(48, 3), greedy(1));
  EXPECT_EQ(prompt_alone.part, RejectedPart::kPrompt);
  EXPECT_EQ(prompt_alone.remedy, "shorten the prompt to at most 47 tokens");
  EXPECT_EQ(refusal({1, 64, 2}, greedy(4)).part, RejectedPart::kPrompt);
  RequestOptions sampled = greedy(4);
  sampled.sampling.top_p = 0.0;
  EXPECT_EQ(refusal({1, 2}, sampled).part, RejectedPart::kSampling);
  EXPECT_FALSE(engine.rejection(std::vector<int64_t>(44, 3), greedy(4)).has_value());
}

TEST(ServingEngine, CancellingFreesTheBlocksAndTheOthersGoOn) {
  model::GptModel model = small_model(Kind::kLlama);
  ServingEngine engine(model, at::Device(at::kCPU), small_engine());
  const int64_t keep = engine.add_request(kPrompts[0], greedy(10));
  const int64_t drop = engine.add_request(kPrompts[3], greedy(10));
  engine.step();
  engine.step();
  EXPECT_GT(engine.blocks_in_use(), 0);
  engine.cancel(drop);
  engine.cancel(drop);  // twice: ignored
  const auto finished = run_all(engine);
  EXPECT_EQ(finished.at(drop).reason, FinishReason::kCancelled);
  EXPECT_EQ(finished.at(keep).tokens, recompute_greedy(model, kPrompts[0], 10));
  EXPECT_EQ(engine.blocks_in_use(), 0);
}

TEST(ServingEngine, RequestsSharingAPromptPrefixGetTheirOwnGreedyTokens) {
  model::GptModel model = small_model(Kind::kLlama);
  ServingOptions options = small_engine();
  options.prefix_sharing = true;
  ServingEngine engine(model, at::Device(at::kCPU), options);
  const std::vector<int64_t> system{3, 1, 4, 1, 5, 9, 2, 6, 5};  // two full blocks of 4 and one token
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < 5; ++i) {
    std::vector<int64_t> prompt = system;
    for (int64_t j = 0; j <= i; ++j) prompt.push_back(10 + 7 * i + j);
    prompts.push_back(prompt);
  }
  std::vector<int64_t> ids{engine.add_request(prompts[0], greedy(6))};
  engine.step();  // the first request's prompt is computed before the others arrive
  for (std::size_t i = 1; i < prompts.size(); ++i) ids.push_back(engine.add_request(prompts[i], greedy(6)));
  EngineStats stats;
  const auto finished = run_all(engine, &stats);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(finished.at(ids[i]).tokens, recompute_greedy(model, prompts[i], 6)) << "request " << i;
  }
  EXPECT_GT(stats.shared_prompt_tokens, 0);
  EXPECT_EQ(engine.blocks_in_use(), 0);
  ServingOptions hybrid = small_engine();
  hybrid.prefix_sharing = true;
  model::GptModel mamba = small_model(Kind::kHybrid);
  EXPECT_THROW(ServingEngine(mamba, at::Device(at::kCPU), hybrid), ConfigError);
}

TEST(ServingEngine, RefusesOptionsOutOfRange) {
  model::GptModel model = small_model(Kind::kGpt2);
  ServingOptions options = small_engine();
  options.max_tokens = 2;  // fewer than the 3 requests
  EXPECT_THROW(ServingEngine(model, at::Device(at::kCPU), options), ConfigError);
  options = small_engine();
  options.max_sequence = 49;
  EXPECT_THROW(ServingEngine(model, at::Device(at::kCPU), options), ConfigError);
  options = small_engine();
  options.scope = config::InferenceCudaGraphScope::kBlock;
  EXPECT_THROW(ServingEngine(model, at::Device(at::kCPU), options), CaptureError);
  // A dropless MoE cannot be captured: refused up front, not at the first graph.
  const auto moe_config = testing::run_config({{"num_layers", 1},
                                               {"hidden_size", 32},
                                               {"num_attention_heads", 4},
                                               {"vocab_size", 64},
                                               {"seq_length", 48},
                                               {"num_experts", 4},
                                               {"moe_router_topk", 2}});
  model::GptModel moe(moe_config.model, moe_config.moe_layers);
  moe->eval();
  EXPECT_THROW(ServingEngine(moe, at::Device(at::kCPU), options), ConfigError);
  // Through the grouped GEMM its shapes are static: past that check, to the CPU's own refusal of graphs.
  const auto grouped_config = testing::run_config({{"num_layers", 1},
                                                   {"hidden_size", 32},
                                                   {"num_attention_heads", 4},
                                                   {"vocab_size", 64},
                                                   {"seq_length", 48},
                                                   {"num_experts", 4},
                                                   {"moe_router_topk", 2},
                                                   {"moe_grouped_gemm", true}});
  model::GptModel grouped(grouped_config.model, grouped_config.moe_layers);
  grouped->eval();
  EXPECT_THROW(ServingEngine(grouped, at::Device(at::kCPU), options), CaptureError);
}

}  // namespace
}  // namespace graphed::infer
