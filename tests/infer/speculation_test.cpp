// tests/infer/speculation_test.cpp — speculative decoding's host-side rules (infer/speculation.h): prompt lookup
// proposes what followed the latest earlier occurrence of the longest recurring suffix; greedy verification keeps
// the proposals that equal the target's argmax; and rejection sampling draws from the target's distribution whatever
// the proposer does: a chi-square over 200,000 seeded draws of a toy vocabulary, against the target's probabilities,
// for a draft model far from the target, one equal to it, and a proposer that picks its tokens outright.
#include "graphed/infer/speculation.h"

#include <gtest/gtest.h>

#include <random>

namespace graphed::infer {
namespace {

TEST(Speculation, LookupProposesWhatFollowedTheLatestEarlierOccurrence) {
  const NgramLookup lookup{3, 4, 2};
  // "... 7 8 9 1 2 ... 7 8 9 5 6 ... 7 8 9": the longest recurring suffix is 7 8 9, latest earlier at index 6.
  const std::vector<int64_t> tokens{7, 8, 9, 1, 2, 0, 7, 8, 9, 5, 6, 3, 7, 8, 9};
  EXPECT_EQ(propose_by_lookup(tokens, lookup), (std::vector<int64_t>{5, 6, 3}));
  // Near the end the proposal is shorter; a suffix shorter than the shortest n-gram proposes nothing.
  EXPECT_EQ(propose_by_lookup({4, 5, 6, 4, 5}, NgramLookup{3, 3, 2}), (std::vector<int64_t>{6, 4, 5}));
  EXPECT_EQ(propose_by_lookup({1, 2, 3, 4, 5, 6}, lookup), std::vector<int64_t>{});
  EXPECT_EQ(propose_by_lookup({2, 9, 1, 2}, NgramLookup{4, 3, 2}), std::vector<int64_t>{});  // only "2" recurs
  EXPECT_EQ(propose_by_lookup({2, 9, 1, 2}, NgramLookup{4, 3, 1}), (std::vector<int64_t>{9, 1, 2}));
}

TEST(Speculation, GreedyVerificationKeepsTheProposalsEqualToTheArgmax) {
  EXPECT_EQ(verify_greedy({4, 5, 6}, {4, 5, 6, 7}).accepted, 3);
  EXPECT_EQ(verify_greedy({4, 5, 6}, {4, 5, 6, 7}).next_token, 7);
  const Verdict partly = verify_greedy({4, 9, 6}, {4, 5, 6, 7});
  EXPECT_EQ(partly.accepted, 1);
  EXPECT_EQ(partly.next_token, 5);  // the target's correction
  EXPECT_EQ(verify_greedy({}, {3}).next_token, 3);
}

/// The chi-square of counts against probabilities (cells of expected count 0 must be empty).
double chi_square(const std::vector<int64_t>& counts, const Distribution& probabilities, int64_t draws) {
  double sum = 0;
  for (std::size_t t = 0; t < counts.size(); ++t) {
    const double expected = probabilities[t] * static_cast<double>(draws);
    if (expected == 0) {
      EXPECT_EQ(counts[t], 0) << "token " << t << " has no probability";
      continue;
    }
    sum += (static_cast<double>(counts[t]) - expected) * (static_cast<double>(counts[t]) - expected) / expected;
  }
  return sum;
}

/// The first token speculative sampling emits, over many draws, against the target's first distribution; and, for
/// the draws that keep the first proposal, the second token against the second distribution.
void expect_target_distribution(const std::vector<Distribution>& target, const std::vector<Distribution>& draft,
                                uint64_t seed) {
  constexpr int64_t kDraws = 200000;
  constexpr double kCritical = 20.5;  // chi-square of 5 degrees of freedom at p = 0.001
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::size_t vocabulary = target[0].size();
  std::vector<int64_t> first(vocabulary, 0);
  std::vector<int64_t> second(vocabulary, 0);
  int64_t kept_first = 0;
  for (int64_t draw = 0; draw < kDraws; ++draw) {
    std::vector<int64_t> proposals;
    for (std::size_t i = 0; i < 2; ++i) {
      proposals.push_back(draft.empty() ? static_cast<int64_t>(i + 1) : pick(draft[i], unit(random)));
    }
    const Verdict verdict = verify_sampled(proposals, target, draft, {unit(random), unit(random)}, unit(random));
    const int64_t emitted_first = verdict.accepted > 0 ? proposals[0] : verdict.next_token;
    ++first[static_cast<std::size_t>(emitted_first)];
    // The toy target's second distribution holds after proposal 0 = 1 only (a model conditions on the prefix).
    if (verdict.accepted > 0 && proposals[0] == 1) {
      ++kept_first;
      ++second[static_cast<std::size_t>(verdict.accepted > 1 ? proposals[1] : verdict.next_token)];
    }
  }
  EXPECT_LT(chi_square(first, target[0], kDraws), kCritical);
  if (kept_first > 1000) EXPECT_LT(chi_square(second, target[1], kept_first), kCritical);
}

const std::vector<Distribution> kTarget{
    {0.05, 0.4, 0.1, 0.25, 0.0, 0.2}, {0.3, 0.1, 0.35, 0.05, 0.1, 0.1}, {0.1, 0.1, 0.2, 0.2, 0.2, 0.2}};

TEST(Speculation, RejectionSamplingDrawsFromTheTargetWithADraftFarFromIt) {
  const std::vector<Distribution> draft{{0.5, 0.1, 0.1, 0.1, 0.1, 0.1}, {0.0, 0.0, 0.1, 0.6, 0.3, 0.0}};
  expect_target_distribution(kTarget, draft, 1);
}

TEST(Speculation, RejectionSamplingWithADraftEqualToTheTargetKeepsEveryProposal) {
  const std::vector<Distribution> draft{kTarget[0], kTarget[1]};
  expect_target_distribution(kTarget, draft, 2);
  std::mt19937_64 random(3);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 1000; ++i) {
    const std::vector<int64_t> proposals{pick(draft[0], unit(random)), pick(draft[1], unit(random))};
    EXPECT_EQ(verify_sampled(proposals, kTarget, draft, {unit(random), unit(random)}, unit(random)).accepted, 2);
  }
}

TEST(Speculation, RejectionSamplingDrawsFromTheTargetWhenTheProposerPicksOutright) {
  expect_target_distribution(kTarget, {}, 4);  // proposals 1 then 2, as prompt lookup would make
}

}  // namespace
}  // namespace graphed::infer
