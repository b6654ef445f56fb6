// tests/infer/logit_controls_test.cpp — what a serving step does between the logits and the draw (issue 45), held
// to plain loops: penalties, logit bias and min-p (apply_controls), token masks, log probabilities; and through the
// engine on the CPU: greedy requests with controls, a min-tokens ban, or a token constraint draw what a full
// recompute with the same rules applied by hand draws, in company of plain requests, with async scheduling and
// without; log probabilities are the model's own, before any control.
#include "graphed/infer/logit_controls.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include <ATen/core/grad_mode.h>

#include "graphed/infer/serving_engine.h"
#include "test_models.h"

namespace graphed::infer {
namespace {

constexpr float kInfinity = std::numeric_limits<float>::infinity();

TEST(LogitControls, PenaltiesBiasAndMinPEqualPlainLoops) {
  const int64_t rows = 4;
  const int64_t vocabulary = 37;
  at::manual_seed(3);
  const at::Tensor logits = at::randn({rows, vocabulary}) * 3;
  LogitTables tables = LogitTables::zeros(6, vocabulary, at::Device(at::kCPU));
  tables.bias.copy_(at::randn({6, vocabulary}));
  tables.bias.select(0, 0).zero_();
  tables.bias[2][5] = -kInfinity;  // a min-tokens ban
  tables.counts.copy_(at::randint(0, 3, {6, vocabulary}, at::kInt));
  tables.counts.select(0, 0).zero_();
  tables.prompt_seen.copy_(at::rand({6, vocabulary}).lt(0.3));
  tables.prompt_seen.select(0, 0).zero_();
  ControlRows controls;
  controls.slot = at::tensor(std::vector<int64_t>{2, 0, 4, 1});
  controls.count_slot = controls.slot;
  controls.presence = at::tensor(std::vector<double>{0.5, 0.0, -1.0, 2.0});
  controls.frequency = at::tensor(std::vector<double>{0.25, 0.0, 1.5, -0.5});
  controls.repetition = at::tensor(std::vector<double>{1.3, 1.0, 0.7, 2.0});
  controls.min_p_gap = at::tensor(std::vector<double>{-kInfinity, -kInfinity, 0.8 * std::log(0.2), -1.0});
  const at::Tensor out = apply_controls(logits, controls, tables);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t slot = controls.slot[row].item<int64_t>();
    std::vector<float> expected(static_cast<std::size_t>(vocabulary));
    for (int64_t token = 0; token < vocabulary; ++token) {
      float value = logits[row][token].item<float>() + tables.bias[slot][token].item<float>();
      const int count = tables.counts[slot][token].item<int>();
      if (count > 0 || tables.prompt_seen[slot][token].item<bool>()) {
        const auto penalty = static_cast<float>(controls.repetition[row].item<double>());
        value = value > 0 ? value / penalty : value * penalty;
      }
      value -= static_cast<float>(count) * static_cast<float>(controls.frequency[row].item<double>());
      value -= (count > 0 ? 1.0F : 0.0F) * static_cast<float>(controls.presence[row].item<double>());
      expected[static_cast<std::size_t>(token)] = value;
    }
    const float top = *std::max_element(expected.begin(), expected.end());
    const auto gap = static_cast<float>(controls.min_p_gap[row].item<double>());
    for (int64_t token = 0; token < vocabulary; ++token) {
      float want = expected[static_cast<std::size_t>(token)];
      if (want < top + gap) want = -kInfinity;
      const float got = out[row][token].item<float>();
      if (std::isinf(want)) {
        EXPECT_TRUE(std::isinf(got) && got < 0) << "row " << row << " token " << token;
      } else {
        EXPECT_NEAR(got, want, 1e-5) << "row " << row << " token " << token;
      }
    }
  }
}

TEST(LogitControls, ATokenMaskLeavesExactlyItsTokens) {
  const int64_t vocabulary = 70;  // three words, the last one partly used
  const at::Tensor logits = at::randn({2, vocabulary});
  std::vector<int32_t> words{0, 0, 0, 0, 0, 0};
  const std::vector<std::set<int64_t>> allowed{{0, 31, 32, 69}, {5, 63, 64}};
  for (int row = 0; row < 2; ++row) {
    for (const int64_t token : allowed[static_cast<std::size_t>(row)]) {
      auto& word = words[static_cast<std::size_t>(row * 3 + token / 32)];
      word = static_cast<int32_t>(static_cast<uint32_t>(word) | (1U << (token % 32)));
    }
  }
  const at::Tensor out = apply_token_mask(logits, at::tensor(words, at::kInt).view({2, 3}));
  for (int row = 0; row < 2; ++row) {
    for (int64_t token = 0; token < vocabulary; ++token) {
      const bool kept = allowed[static_cast<std::size_t>(row)].count(token) > 0;
      EXPECT_EQ(out[row][token].item<float>(), kept ? logits[row][token].item<float>() : -kInfinity);
    }
  }
}

TEST(LogitControls, LogProbabilitiesAreTheLogSoftmaxOfTheLogits) {
  const at::Tensor logits = at::randn({3, 50}) * 4;
  at::Tensor out = at::zeros({3, 6});
  at::Tensor ids = at::zeros({3, 5}, at::kLong);
  record_top_logprobs(logits, out, ids);
  const at::Tensor tokens = at::tensor(std::vector<int64_t>{7, 0, 49});
  record_drawn_logprob(logits, tokens, out);
  const at::Tensor expected = logits.log_softmax(1);
  const auto sorted = expected.sort(1, /*descending=*/true);
  for (int64_t row = 0; row < 3; ++row) {
    EXPECT_NEAR(out[row][0].item<float>(), expected[row][tokens[row].item<int64_t>()].item<float>(), 1e-5);
    for (int64_t k = 0; k < 5; ++k) {
      EXPECT_EQ(ids[row][k].item<int64_t>(), std::get<1>(sorted)[row][k].item<int64_t>());
      EXPECT_NEAR(out[row][1 + k].item<float>(), std::get<0>(sorted)[row][k].item<float>(), 1e-5);
    }
  }
}

// The engine against a recompute with the rules applied by hand.

using Adjust = std::function<void(std::vector<float>& logits, const std::vector<int64_t>& drawn)>;

/// Greedy tokens by recomputing the whole sequence, `adjust` applied to each step's float32 logits, stopping after
/// a stop token.
std::vector<int64_t> recompute_adjusted(model::GptModel& model, std::vector<int64_t> sequence, int64_t count,
                                        const Adjust& adjust, const std::vector<int64_t>& stops = {}) {
  at::NoGradGuard no_grad;
  std::vector<int64_t> drawn;
  for (int64_t i = 0; i < count; ++i) {
    const at::Tensor input = at::tensor(sequence, at::kLong).view({1, -1});
    const at::Tensor row = model->logits(input).select(1, input.size(1) - 1).view(-1).to(at::kFloat).contiguous();
    std::vector<float> logits(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
    adjust(logits, drawn);
    const auto next = static_cast<int64_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    sequence.push_back(next);
    drawn.push_back(next);
    if (std::find(stops.begin(), stops.end(), next) != stops.end()) break;
  }
  return drawn;
}

ServingOptions small_engine(bool async) {
  ServingOptions options;
  options.max_requests = 3;
  options.max_tokens = 12;
  options.block_size = 4;
  options.cuda_graph_max_tokens = 8;
  options.async_scheduling = async;
  return options;
}

RequestOptions greedy(int64_t new_tokens) {
  RequestOptions options;
  options.max_new_tokens = new_tokens;
  return options;
}

/// Runs until every request ends; the finished requests, and every token event, by request id.
struct EngineRun {
  std::map<int64_t, FinishedRequest> finished;
  std::map<int64_t, std::vector<TokenEvent>> events;
};
EngineRun run_all(ServingEngine& engine) {
  EngineRun run;
  for (int guard = 0; engine.has_work() && guard < 10000; ++guard) {
    StepResult result = engine.step();
    for (auto& event : result.tokens) run.events[event.request].push_back(event);
    for (auto& done : result.finished) run.finished[done.request] = done;
  }
  return run;
}

const std::vector<int64_t> kPrompt{3, 14, 15, 9, 26, 5, 35};
const std::vector<int64_t> kOther{8, 1, 2};

class EngineControls : public ::testing::TestWithParam<bool> {};  // async scheduling or not

TEST_P(EngineControls, PenaltiesAndBiasDrawWhatTheRulesByHandDraw) {
  model::GptModel model = testing::cpu_test_model(testing::ModelStyle::kLlama);
  RequestOptions options = greedy(10);
  options.controls.presence_penalty = 0.4;
  options.controls.frequency_penalty = 0.3;
  options.controls.repetition_penalty = 1.5;
  options.controls.logit_bias = {{7, 2.5}, {11, -100.0}, {20, 1.0}};
  const Adjust rules = [&](std::vector<float>& logits, const std::vector<int64_t>& drawn) {
    std::map<int64_t, int> counts;
    for (const int64_t token : drawn) ++counts[token];
    for (const auto& [token, bias] : options.controls.logit_bias) logits[token] += static_cast<float>(bias);
    for (std::size_t token = 0; token < logits.size(); ++token) {
      const int count = counts[static_cast<int64_t>(token)];
      const bool in_prompt = std::find(kPrompt.begin(), kPrompt.end(), token) != kPrompt.end();
      float& value = logits[token];
      if (count > 0 || in_prompt) value = value > 0 ? value / 1.5F : value * 1.5F;
      value -= 0.3F * static_cast<float>(count) + (count > 0 ? 0.4F : 0.0F);
    }
  };
  const auto expected = recompute_adjusted(model, kPrompt, 10, rules);
  ServingEngine engine(model, at::Device(at::kCPU), small_engine(GetParam()));
  const int64_t plain = engine.add_request(kOther, greedy(9));
  const int64_t controlled = engine.add_request(kPrompt, options);
  const EngineRun run = run_all(engine);
  EXPECT_EQ(run.finished.at(controlled).tokens, expected);
  EXPECT_EQ(run.finished.at(plain).tokens, testing::recompute_greedy(model, kOther, 9));
  EXPECT_EQ(std::count(expected.begin(), expected.end(), 11), 0);
}

TEST_P(EngineControls, MinTokensHoldsTheStopTokensBackUntilThen) {
  model::GptModel model = testing::cpu_test_model(testing::ModelStyle::kGpt2);
  const auto free_run = testing::recompute_greedy(model, kPrompt, 1);
  RequestOptions options = greedy(8);
  options.stop_tokens = {free_run[0]};  // without min tokens, the first token would end it
  options.controls.min_tokens = 3;
  const Adjust rules = [&](std::vector<float>& logits, const std::vector<int64_t>& drawn) {
    if (drawn.size() < 3) logits[free_run[0]] = -kInfinity;
  };
  const auto expected = recompute_adjusted(model, kPrompt, 8, rules, options.stop_tokens);
  ServingEngine engine(model, at::Device(at::kCPU), small_engine(GetParam()));
  const int64_t id = engine.add_request(kPrompt, options);
  const FinishedRequest done = run_all(engine).finished.at(id);
  EXPECT_EQ(done.tokens, expected);
  ASSERT_GE(done.tokens.size(), 3U);
  EXPECT_NE(done.tokens[0], free_run[0]);
}

/// Allows tokens {2 i + 1, 2 i + 2} at draw i, and is complete after `length` tokens.
class AlternatingConstraint final : public TokenConstraint {
 public:
  explicit AlternatingConstraint(int64_t length) : length_(length) {}
  void allowed(std::uint32_t* words, std::int64_t word_count) override {
    std::fill(words, words + word_count, 0U);
    for (const int64_t token : {2 * drawn_ + 1, 2 * drawn_ + 2}) words[token / 32] |= 1U << (token % 32);
  }
  void accept(std::int64_t token) override {
    EXPECT_TRUE(token == 2 * drawn_ + 1 || token == 2 * drawn_ + 2) << "draw " << drawn_ << " took " << token;
    ++drawn_;
  }
  bool finished() const override { return drawn_ >= length_; }

 private:
  int64_t length_;
  int64_t drawn_ = 0;
};

TEST_P(EngineControls, AConstrainedRequestDrawsTheBestAllowedTokenAndEndsWhenComplete) {
  model::GptModel model = testing::cpu_test_model(testing::ModelStyle::kLlama);
  const Adjust rules = [](std::vector<float>& logits, const std::vector<int64_t>& drawn) {
    const auto i = static_cast<int64_t>(drawn.size());
    for (std::size_t token = 0; token < logits.size(); ++token) {
      const auto id = static_cast<int64_t>(token);
      if (id != 2 * i + 1 && id != 2 * i + 2) logits[token] = -kInfinity;
    }
  };
  const auto expected = recompute_adjusted(model, kPrompt, 6, rules);
  ServingEngine engine(model, at::Device(at::kCPU), small_engine(GetParam()));
  const int64_t plain = engine.add_request(kOther, greedy(12));
  RequestOptions options = greedy(20);
  options.constraint = std::make_shared<AlternatingConstraint>(6);
  const int64_t constrained = engine.add_request(kPrompt, options);
  const EngineRun run = run_all(engine);
  EXPECT_EQ(run.finished.at(constrained).tokens, expected);
  EXPECT_EQ(run.finished.at(constrained).reason, FinishReason::kStopToken);
  EXPECT_EQ(run.finished.at(plain).tokens, testing::recompute_greedy(model, kOther, 12));
  EXPECT_GT(engine.stats().masked_steps, 0);
}

TEST_P(EngineControls, LogProbabilitiesAreTheModelsOwnBeforeAnyControl) {
  model::GptModel model = testing::cpu_test_model(testing::ModelStyle::kGpt2);
  RequestOptions options = greedy(5);
  options.logprobs = 4;
  options.controls.logit_bias = {{13, 100.0}};  // drawn every time; its log probability stays the model's
  ServingEngine engine(model, at::Device(at::kCPU), small_engine(GetParam()));
  const int64_t id = engine.add_request(kPrompt, options);
  const int64_t plain = engine.add_request(kOther, greedy(3));
  const EngineRun run = run_all(engine);
  EXPECT_EQ(run.finished.at(id).tokens, std::vector<int64_t>(5, 13));
  for (const TokenEvent& event : run.events.at(plain)) EXPECT_FALSE(event.logprobs.has_value());
  std::vector<int64_t> sequence = kPrompt;
  at::NoGradGuard no_grad;
  for (const TokenEvent& event : run.events.at(id)) {
    ASSERT_TRUE(event.logprobs.has_value());
    const at::Tensor input = at::tensor(sequence, at::kLong).view({1, -1});
    const at::Tensor expected =
        model->logits(input).select(1, input.size(1) - 1).view(-1).to(at::kFloat).log_softmax(0);
    EXPECT_NEAR(event.logprobs->logprob, expected[13].item<float>(), 1e-4);
    ASSERT_EQ(event.logprobs->top.size(), 4U);
    const auto sorted = expected.sort(0, /*descending=*/true);
    for (std::size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(event.logprobs->top[k].first, std::get<1>(sorted)[static_cast<int64_t>(k)].item<int64_t>());
      EXPECT_NEAR(event.logprobs->top[k].second, std::get<0>(sorted)[static_cast<int64_t>(k)].item<float>(), 1e-4);
    }
    sequence.push_back(event.token);
  }
}

INSTANTIATE_TEST_SUITE_P(Scheduling, EngineControls, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Async" : "Sync"; });

TEST(EngineControls, MinPOfOneDrawsTheLikeliestToken) {
  model::GptModel model = testing::cpu_test_model(testing::ModelStyle::kLlama);
  RequestOptions options = greedy(8);
  options.sampling.temperature = 1.5;
  options.sampling.seed = 4;
  options.sampling.min_p = 1.0;  // only tokens as likely as the likeliest
  ServingEngine engine(model, at::Device(at::kCPU), small_engine(true));
  const int64_t id = engine.add_request(kPrompt, options);
  EXPECT_EQ(run_all(engine).finished.at(id).tokens, testing::recompute_greedy(model, kPrompt, 8));
}

TEST(EngineControls, OutOfRangeControlsAreRefusedWithTheirValues) {
  model::GptModel model = testing::cpu_test_model(testing::ModelStyle::kGpt2);
  ServingEngine engine(model, at::Device(at::kCPU), small_engine(true));
  const auto refusal = [&](const std::function<void(RequestOptions&)>& change) {
    RequestOptions options = greedy(4);
    change(options);
    const auto why = engine.rejection(kPrompt, options);
    return why ? why->message() : std::string();
  };
  EXPECT_NE(refusal([](auto& o) { o.controls.presence_penalty = 2.5; }).find("presence 2.5"), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o.controls.repetition_penalty = 0; }).find("repetition"), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o.controls.logit_bias = {{64, 1.0}}; }).find("token 64"), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o.controls.logit_bias = {{3, 101.0}}; }).find("-100 to 100"), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o.controls.min_tokens = 5; }).find("min tokens is 5"), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o.logprobs = 21; }).find("21 top log"), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o.sampling.min_p = 1.5; }).find("min-p in [0, 1]"), std::string::npos);
  EXPECT_EQ(refusal([](auto& o) { o.controls.min_tokens = 4; }), "");
}

}  // namespace
}  // namespace graphed::infer
