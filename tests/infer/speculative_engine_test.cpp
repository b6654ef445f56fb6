// tests/infer/speculative_engine_test.cpp — speculative decoding in the serving engine on the CPU (scope none, small
// float64 models): with prompt lookup on, greedy requests draw exactly the tokens of a full recompute, and seeded
// sampled requests exactly what they draw without speculation (each verification row draws with the noise of the
// token it draws), with more requests than the engine holds and preemption in a small cache;
// a chi-square shows sampled speculative tokens follow the distribution of non-speculative sampling over other seeds;
// proposals are verified and kept (stats), requests with logit controls or log probabilities do not speculate, every
// block comes back, and a hybrid model or a bad configuration is refused with the fix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "graphed/infer/serving_engine.h"
#include "graphed/util/error.h"
#include "served_run.h"
#include "test_models.h"

namespace graphed::infer {
namespace {

using Kind = testing::ModelStyle;

/// A temperature at which the small random models' flat logits still draw their likeliest tokens often, so that
/// proposals are kept, and the others often enough to test the draws.
constexpr double kSharp = 0.15;

SpeculativeDecoding lookup(int64_t tokens, int64_t longest = 3, int64_t shortest = 1) {
  SpeculativeDecoding speculation;
  speculation.method = SpeculativeDecoding::Method::kNgram;
  speculation.num_tokens = tokens;
  speculation.lookup = {tokens, longest, shortest};
  speculation.governed = false;  // every step may speculate: the counts tested are the mechanics'
  return speculation;
}

ServingOptions engine_options(SpeculativeDecoding speculation) {
  ServingOptions options;
  options.max_requests = 3;
  options.max_tokens = 16;  // prompts longer than what a step has left run in chunks
  options.block_size = 4;
  options.cuda_graph_max_tokens = 8;
  options.speculation = speculation;
  return options;
}

/// Prompts that repeat themselves, so that prompt lookup finds what to propose.
const std::vector<std::vector<int64_t>> kPrompts{{1, 2, 3, 4, 1, 2, 3, 4, 1, 2},
                                                 {7, 8, 9, 7, 8},
                                                 {5},
                                                 {11, 12, 13, 14, 15, 11, 12, 13, 14, 15, 11, 12, 13},
                                                 {20, 21, 20, 21, 20}};

RequestOptions request_options(int64_t new_tokens, double temperature, uint64_t seed) {
  return testing::sampling_request(new_tokens, temperature, seed);
}

using Served = testing::ServedRun;

Served serve(model::GptModel& model, const ServingOptions& options, const std::vector<std::vector<int64_t>>& prompts,
             const std::vector<RequestOptions>& requests) {
  return testing::serve_to_end(model, options, prompts, requests);
}

std::vector<RequestOptions> all_greedy(std::size_t count, int64_t new_tokens) {
  return std::vector<RequestOptions>(count, request_options(new_tokens, 0.0, 0));
}

class SpeculativeEngineModels : public ::testing::TestWithParam<Kind> {};

TEST_P(SpeculativeEngineModels, GreedyTokensEqualARecomputeAndProposalsAreKept) {
  model::GptModel model = testing::cpu_test_model(GetParam());
  for (const bool async : {true, false}) {
    ServingOptions options = engine_options(lookup(4));
    options.async_scheduling = async;
    const Served served = serve(model, options, kPrompts, all_greedy(kPrompts.size(), 24));
    for (std::size_t i = 0; i < kPrompts.size(); ++i) {
      EXPECT_EQ(served.tokens[i], testing::recompute_greedy(model, kPrompts[i], 24)) << "prompt " << i;
    }
    EXPECT_GT(served.stats.verifications, 0);
    EXPECT_GT(served.stats.draft_tokens, 0);
    EXPECT_GT(served.stats.accepted_tokens, 0) << "a random model's greedy text loops: lookup should hit";
    EXPECT_LE(served.stats.accepted_tokens, served.stats.draft_tokens);
    EXPECT_EQ(served.stats.output_tokens, 24 * static_cast<int64_t>(kPrompts.size()));
    EXPECT_EQ(served.blocks_in_use, 0);
  }
}

TEST_P(SpeculativeEngineModels, PreemptionInASmallCacheKeepsTheGreedyTokens) {
  model::GptModel model = testing::cpu_test_model(GetParam());
  ServingOptions options = engine_options(lookup(6));
  options.cache_blocks = 12;  // 11 usable blocks of 4 positions: requests of up to 37 positions preempt each other
  const Served served = serve(model, options, kPrompts, all_greedy(kPrompts.size(), 24));
  for (std::size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(served.tokens[i], testing::recompute_greedy(model, kPrompts[i], 24)) << "prompt " << i;
  }
  EXPECT_GT(served.stats.preemptions, 0);
  EXPECT_GT(served.stats.accepted_tokens, 0);
  EXPECT_EQ(served.blocks_in_use, 0);
}

TEST_P(SpeculativeEngineModels, SeededSampledTokensEqualThoseDrawnWithoutSpeculation) {
  model::GptModel model = testing::cpu_test_model(GetParam());
  std::vector<RequestOptions> requests;
  for (std::size_t i = 0; i < kPrompts.size(); ++i) requests.push_back(request_options(30, kSharp / 3, 100 + i));
  requests[1].sampling.top_k = 5;
  requests[3].sampling.top_p = 0.8;
  for (const double temperature : {kSharp / 3, kSharp}) {
    for (auto& request : requests) request.sampling.temperature = temperature;
    const Served plain = serve(model, engine_options({}), kPrompts, requests);
    const Served speculative = serve(model, engine_options(lookup(4)), kPrompts, requests);
    EXPECT_EQ(speculative.tokens, plain.tokens) << "temperature " << temperature;
    EXPECT_GT(speculative.stats.verifications, 0);
    EXPECT_EQ(plain.stats.verifications, 0);
    if (temperature == kSharp / 3) EXPECT_GT(speculative.stats.accepted_tokens, 0);
    if (temperature == kSharp) {  // the draws are not the argmax: the noise of each row's token matters
      bool differs = false;
      for (std::size_t i = 0; i < kPrompts.size(); ++i)
        differs |= speculative.tokens[i] != testing::recompute_greedy(model, kPrompts[i], 30);
      EXPECT_TRUE(differs);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SpeculativeEngineModels, ::testing::Values(Kind::kLlama, Kind::kGpt2),
                         [](const auto& info) { return std::string(testing::style_name(info.param)); });

/// The two-sample chi-square of two histograms of equal totals, over the cells where the two hold at least 10.
double two_sample_chi_square(const std::vector<int64_t>& a, const std::vector<int64_t>& b, int64_t* cells) {
  double statistic = 0;
  int64_t pooled_a = 0, pooled_b = 0;
  *cells = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] + b[i] < 10) {  // sparse cells pooled into one
      pooled_a += a[i];
      pooled_b += b[i];
      continue;
    }
    statistic += std::pow(static_cast<double>(a[i] - b[i]), 2) / static_cast<double>(a[i] + b[i]);
    ++*cells;
  }
  if (pooled_a + pooled_b > 0) {
    statistic += std::pow(static_cast<double>(pooled_a - pooled_b), 2) / static_cast<double>(pooled_a + pooled_b);
    ++*cells;
  }
  return statistic;
}

TEST(SpeculativeEngine, SampledTokensFollowTheDistributionOfNonSpeculativeSampling) {
  model::GptModel model = testing::cpu_test_model(Kind::kLlama);
  constexpr int64_t kDraws = 1500;
  constexpr int64_t kNewTokens = 6;
  const std::vector<int64_t> prompt{3, 4, 5, 3, 4, 5, 3, 4};
  const auto histograms = [&](bool speculate, uint64_t first_seed) {
    ServingOptions options = engine_options(speculate ? lookup(4) : SpeculativeDecoding{});
    options.max_requests = 32;
    options.max_tokens = 256;
    const std::vector<std::vector<int64_t>> prompts(kDraws, prompt);
    std::vector<RequestOptions> requests;
    for (int64_t i = 0; i < kDraws; ++i) requests.push_back(request_options(kNewTokens, kSharp, first_seed + i));
    const Served served = serve(model, options, prompts, requests);
    std::vector<std::vector<int64_t>> counts(kNewTokens, std::vector<int64_t>(64, 0));
    for (const auto& tokens : served.tokens) {
      for (int64_t t = 0; t < kNewTokens; ++t) ++counts[t][static_cast<std::size_t>(tokens.at(t))];
    }
    if (speculate) {
      std::printf("temperature %.2f: %lld of %lld proposed tokens kept\n", kSharp,
                  static_cast<long long>(served.stats.accepted_tokens),
                  static_cast<long long>(served.stats.draft_tokens));
      EXPECT_GT(served.stats.accepted_tokens, 100);
    }
    return counts;
  };
  // Other seeds on each side: the samples are independent, so only the distributions can agree.
  const auto speculative = histograms(true, 1);
  const auto plain = histograms(false, 1000001);
  for (int64_t t = 1; t < kNewTokens; ++t) {
    int64_t cells = 0;
    const double statistic = two_sample_chi_square(speculative[t], plain[t], &cells);
    // The chi-square's 99.9th percentile for cells - 1 degrees of freedom (Wilson-Hilferty).
    const double k = static_cast<double>(cells - 1);
    const double critical = k * std::pow(1 - 2 / (9 * k) + 3.09 * std::sqrt(2 / (9 * k)), 3);
    std::printf("token %lld: chi-square %.1f over %lld cells (critical %.1f)\n", static_cast<long long>(t), statistic,
                static_cast<long long>(cells), critical);
    EXPECT_LT(statistic, critical) << "token " << t << " over " << cells << " cells";
  }
}

TEST(SpeculativeEngine, AStopTokenAmongKeptProposalsEndsTheRequestThere) {
  model::GptModel model = testing::cpu_test_model(Kind::kLlama);
  const std::vector<int64_t> greedy = testing::recompute_greedy(model, kPrompts[0], 24);
  // Each token of the greedy text as a stop token in turn: the text ends at its first occurrence, as without
  // speculation, whether it was drawn alone or among kept proposals.
  for (std::size_t stop = 2; stop < greedy.size(); stop += 3) {
    std::vector<RequestOptions> requests = all_greedy(1, 24);
    requests[0].stop_tokens = {greedy[stop]};
    const Served served = serve(model, engine_options(lookup(4)), {kPrompts[0]}, requests);
    const auto end = std::find(greedy.begin(), greedy.end(), greedy[stop]) + 1;
    EXPECT_EQ(served.tokens[0], std::vector<int64_t>(greedy.begin(), end)) << "stop token " << greedy[stop];
    EXPECT_EQ(served.blocks_in_use, 0);
    EXPECT_LE(served.stats.accepted_tokens + served.stats.verifications, served.stats.output_tokens);
  }
}

TEST(SpeculativeEngine, CancellingASpeculatingRequestGivesEveryBlockBack) {
  model::GptModel model = testing::cpu_test_model(Kind::kLlama);
  ServingEngine engine(model, at::Device(at::kCPU), engine_options(lookup(4)));
  const int64_t id = engine.add_request(kPrompts[3], request_options(30, 0.0, 0));
  const int64_t other = engine.add_request(kPrompts[0], request_options(30, 0.0, 0));
  for (int guard = 0; engine.stats().verifications == 0 && guard < 100; ++guard) engine.step();
  ASSERT_GT(engine.stats().verifications, 0);
  engine.cancel(id);
  std::map<int64_t, FinishedRequest> finished;
  for (int guard = 0; engine.has_work() && guard < 1000; ++guard) {
    for (auto& done : engine.step().finished) finished[done.request] = done;
  }
  EXPECT_EQ(finished.at(id).reason, FinishReason::kCancelled);
  EXPECT_EQ(finished.at(other).tokens, testing::recompute_greedy(model, kPrompts[0], 30));
  EXPECT_EQ(engine.blocks_in_use(), 0);
}

TEST(SpeculativeEngine, RequestsWithControlsOrLogprobsDecodeWithoutProposals) {
  model::GptModel model = testing::cpu_test_model(Kind::kLlama);
  std::vector<RequestOptions> requests = all_greedy(2, 16);
  requests[0].logprobs = 2;
  requests[1].controls.presence_penalty = 0.5;
  const std::vector<std::vector<int64_t>> prompts(kPrompts.begin(), kPrompts.begin() + 2);
  const Served served = serve(model, engine_options(lookup(4)), prompts, requests);
  EXPECT_EQ(served.stats.verifications, 0);
  EXPECT_EQ(served.stats.draft_tokens, 0);
  EXPECT_EQ(served.tokens[0], testing::recompute_greedy(model, prompts[0], 16));
}

TEST(SpeculativeEngine, RefusesHybridModelsAndProposalCountsOutOfRange) {
  model::GptModel hybrid = testing::cpu_test_model(Kind::kHybrid);
  EXPECT_THROW(
      {
        try {
          ServingEngine engine(hybrid, at::Device(at::kCPU), engine_options(lookup(4)));
        } catch (const ConfigError& error) {
          EXPECT_NE(std::string(error.what()).find("fix: serve a hybrid model without speculation"), std::string::npos)
              << error.what();
          throw;
        }
      },
      ConfigError);
  model::GptModel model = testing::cpu_test_model(Kind::kLlama);
  EXPECT_THROW(ServingEngine(model, at::Device(at::kCPU), engine_options(lookup(kMaxSpeculativeTokens + 1))),
               ConfigError);
  EXPECT_THROW(ServingEngine(model, at::Device(at::kCPU), engine_options(lookup(4, 2, 3))), ConfigError);
}

}  // namespace
}  // namespace graphed::infer
