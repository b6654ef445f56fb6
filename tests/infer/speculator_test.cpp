// tests/infer/speculator_test.cpp — speculation's policy: which requests speculate, what they propose within a
// limit, and the pause after proposals keep failing (it doubles while they fail, up to a limit, and a kept
// proposal ends it).
#include "graphed/infer/speculator.h"

#include <gtest/gtest.h>

namespace graphed::infer {
namespace {

Speculator ngram(int64_t tokens) {
  SpeculativeDecoding config;
  config.method = SpeculativeDecoding::Method::kNgram;
  config.num_tokens = tokens;
  config.lookup = {tokens, 2, 1};
  return Speculator(config);
}

Request allowed_request(std::vector<int64_t> tokens) {
  Request request;
  request.prompt_length = static_cast<int64_t>(tokens.size());
  request.tokens = std::move(tokens);
  request.options.max_new_tokens = 1000;
  request.speculation.allowed = true;
  return request;
}

TEST(Speculator, OnlyAllowedRequestsOfAnEnabledSpeculatorSpeculate) {
  Request request = allowed_request({1, 2, 1});
  EXPECT_TRUE(ngram(3).speculates(request));
  EXPECT_FALSE(Speculator().speculates(request));
  request.speculation.allowed = false;
  EXPECT_FALSE(ngram(3).speculates(request));
}

TEST(Speculator, ProposesByLookupWithinEachLimitAllAtOnce) {
  const Request request = allowed_request({1, 2, 3, 4, 5, 1, 2});
  const Request other = allowed_request({7, 8, 9});  // nothing recurs
  const std::vector<std::vector<int64_t>> proposals =
      ngram(4).propose({{&request, 4}, {&request, 2}, {&request, 0}, {&other, 4}});
  ASSERT_EQ(proposals.size(), 4u);
  EXPECT_EQ(proposals[0], (std::vector<int64_t>{3, 4, 5, 1}));
  EXPECT_EQ(proposals[1], (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(proposals[2].empty());
  EXPECT_TRUE(proposals[3].empty());
}

TEST(Speculator, WaitsOnlyWhereTheTextRepeatsAndProposesAboutWhatItKeptLately) {
  const Speculator speculator = ngram(6);
  EXPECT_TRUE(speculator.worth_waiting(allowed_request({1, 2, 3, 1, 2})));
  EXPECT_FALSE(speculator.worth_waiting(allowed_request({1, 2, 3, 4, 5})));
  Request request = allowed_request({1, 2, 1});
  EXPECT_EQ(speculator.proposal_limit(request), 6);
  speculator.record(request, 6, 0);
  EXPECT_EQ(speculator.proposal_limit(request), 1);
  speculator.record(request, 1, 1);  // 0.3 kept lately: 2 x 0.3, up, + 1
  EXPECT_EQ(speculator.proposal_limit(request), 2);
  for (int i = 0; i < 20; ++i) speculator.record(request, 6, 6);
  EXPECT_EQ(speculator.proposal_limit(request), 6);
}

TEST(Speculator, PausesAfterMissesLongerWhileTheyGoOnAndAKeptProposalEndsIt) {
  const Speculator speculator = ngram(4);
  Request request = allowed_request({1, 2, 1});
  for (int64_t i = 0; i < Speculator::kMissesBeforePause - 1; ++i) speculator.record(request, 4, 0);
  EXPECT_TRUE(speculator.speculates(request));
  speculator.record(request, 0, 0);  // nothing to propose counts as a miss too
  EXPECT_FALSE(speculator.speculates(request));
  EXPECT_EQ(request.speculation.resume_at, request.generated() + Speculator::kFirstPause);
  request.tokens.resize(request.tokens.size() + Speculator::kFirstPause, 7);  // it drew the pause's tokens
  EXPECT_TRUE(speculator.speculates(request));
  for (int64_t i = 0; i < Speculator::kMissesBeforePause; ++i) speculator.record(request, 2, 0);
  EXPECT_EQ(request.speculation.pause, 2 * Speculator::kFirstPause);
  for (int round = 0; round < 10; ++round) {
    for (int64_t i = 0; i < Speculator::kMissesBeforePause; ++i) speculator.record(request, 2, 0);
  }
  EXPECT_EQ(request.speculation.pause, Speculator::kLongestPause);
  speculator.record(request, 3, 1);
  EXPECT_EQ(request.speculation.pause, 0);
  EXPECT_EQ(request.speculation.misses, 0);
  EXPECT_EQ(request.speculation.accepted, 1);
}

}  // namespace
}  // namespace graphed::infer
