// tests/infer/draft_proposer_test.cpp — speculative decoding with a draft model on the CPU (scope none, float64 test
// models): the draft engine proposes greedily for every speculating request of a step at once, and the serving
// engine's text is exactly what it is without speculation, greedy and seeded sampled, with async scheduling on and
// off, a draft of the target itself (every proposal kept) or another model (few kept), a draft whose context is
// shorter than the requests, and preemption in a small cache; a draft of a smaller vocabulary or with Mamba layers is
// refused with the fix.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "graphed/infer/draft_proposer.h"
#include "graphed/infer/serving_engine.h"
#include "graphed/util/error.h"
#include "served_run.h"
#include "test_models.h"

namespace graphed::infer::draft_tests {
namespace {

using Kind = testing::ModelStyle;

ServingOptions engine_options() {
  ServingOptions options;
  options.max_requests = 3;
  options.max_tokens = 16;  // prompts longer than what a step has left run in chunks
  options.block_size = 4;
  options.cuda_graph_max_tokens = 8;
  return options;
}

/// `options` speculating `tokens` a step with `draft` as the draft model.
ServingOptions with_draft(ServingOptions options, model::GptModel draft, int64_t tokens) {
  options.speculation.method = SpeculativeDecoding::Method::kDraftModel;
  options.speculation.num_tokens = tokens;
  options.speculation.draft_model = "test draft";
  options.speculation.governed = false;  // every step speculates: the counts below are exact
  options.speculation.draft =
      std::make_shared<DraftModelProposer>(std::move(draft), at::Device(at::kCPU), options, /*vocabulary=*/64);
  return options;
}

const std::vector<std::vector<int64_t>> kPrompts{
    {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {30, 31}, {5}, {40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52}, {20, 9}};

RequestOptions request_options(int64_t new_tokens, double temperature, uint64_t seed) {
  return testing::sampling_request(new_tokens, temperature, seed);
}

using Served = testing::ServedRun;

Served serve(model::GptModel& model, const ServingOptions& options, const std::vector<RequestOptions>& requests) {
  return testing::serve_to_end(model, options, kPrompts, requests);
}

std::vector<RequestOptions> all_greedy(int64_t new_tokens) {
  return std::vector<RequestOptions>(kPrompts.size(), request_options(new_tokens, 0.0, 0));
}

TEST(DraftModelSpeculation, ADraftOfTheTargetItselfHasEveryProposalKept) {
  model::GptModel model = testing::cpu_test_model(Kind::kLlama);
  for (const bool async : {true, false}) {
    ServingOptions options = engine_options();
    options.async_scheduling = async;
    options = with_draft(options, model, 4);
    const Served served = serve(model, options, all_greedy(24));
    for (std::size_t i = 0; i < kPrompts.size(); ++i) {
      EXPECT_EQ(served.tokens[i], testing::recompute_greedy(model, kPrompts[i], 24)) << "prompt " << i;
    }
    EXPECT_GT(served.stats.verifications, 0);
    // The draft computes what the target does, in other batches: in float64 every proposal is the target's argmax.
    EXPECT_EQ(served.stats.accepted_tokens, served.stats.draft_tokens);
    EXPECT_GT(served.stats.accepted_tokens, served.stats.verifications) << "more than one kept a verification";
    EXPECT_EQ(served.blocks_in_use, 0);
    const ProposerWork work = options.speculation.draft->work();
    EXPECT_GT(work.rounds, 0);
    EXPECT_GE(work.steps, work.rounds);
  }
}

TEST(DraftModelSpeculation, AnotherDraftKeepsTheTargetsGreedyAndSampledText) {
  model::GptModel target = testing::cpu_test_model(Kind::kLlama);
  testing::TestModelShape shape;
  shape.layers = 1;
  shape.seed = 11;
  const model::GptModel draft = testing::test_model(Kind::kGpt2, shape, at::kDouble);
  const Served greedy = serve(target, with_draft(engine_options(), draft, 3), all_greedy(20));
  for (std::size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(greedy.tokens[i], testing::recompute_greedy(target, kPrompts[i], 20)) << "prompt " << i;
  }
  EXPECT_GT(greedy.stats.draft_tokens, 0);
  std::vector<RequestOptions> sampled;
  for (std::size_t i = 0; i < kPrompts.size(); ++i) sampled.push_back(request_options(20, 0.1, 200 + i));
  sampled[1].sampling.top_k = 4;
  const Served plain = serve(target, engine_options(), sampled);
  const Served speculative = serve(target, with_draft(engine_options(), draft, 3), sampled);
  EXPECT_EQ(speculative.tokens, plain.tokens);
  EXPECT_GT(speculative.stats.verifications, 0);
  EXPECT_EQ(speculative.blocks_in_use, 0);
}

TEST(DraftModelSpeculation, ADraftOfAShortContextAndASmallCacheKeepTheText) {
  model::GptModel target = testing::cpu_test_model(Kind::kGpt2);
  testing::TestModelShape shape;
  shape.sequence = 12;  // shorter than the requests: it proposes from their latest tokens
  const model::GptModel draft = testing::test_model(Kind::kGpt2, shape, at::kDouble);
  ServingOptions options = engine_options();
  options.cache_blocks = 12;  // the target preempts
  const Served served = serve(target, with_draft(options, draft, 4), all_greedy(24));
  for (std::size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(served.tokens[i], testing::recompute_greedy(target, kPrompts[i], 24)) << "prompt " << i;
  }
  EXPECT_GT(served.stats.preemptions, 0);
  EXPECT_GT(served.stats.draft_tokens, 0);
  EXPECT_EQ(served.blocks_in_use, 0);
}

TEST(DraftModelSpeculation, UnderTheGovernorTheTextIsTheSame) {
  model::GptModel model = testing::cpu_test_model(Kind::kLlama);
  ServingOptions options = with_draft(engine_options(), model, 3);
  options.speculation.governed = true;  // speculation on and off by the clock: the text cannot tell
  const Served served = serve(model, options, all_greedy(34));
  for (std::size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(served.tokens[i], testing::recompute_greedy(model, kPrompts[i], 34)) << "prompt " << i;
  }
  EXPECT_GT(served.stats.verifications, 0);  // the governor's first steps measure speculation
  EXPECT_EQ(served.blocks_in_use, 0);
}

TEST(DraftModelSpeculation, RefusesADraftOfASmallerVocabularyOrWithMambaLayers) {
  testing::TestModelShape small;
  small.vocab = 32;
  const auto refusal = [](model::GptModel draft) {
    try {
      DraftModelProposer proposer(std::move(draft), at::Device(at::kCPU), engine_options(), /*vocabulary=*/64);
    } catch (const ConfigError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(refusal(testing::test_model(Kind::kLlama, small, at::kDouble))
                .find("vocabulary has 32 tokens, fewer than the 64 the target draws from; fix: give a draft trained "
                      "with the target's tokenizer"),
            std::string::npos);
  EXPECT_NE(refusal(testing::cpu_test_model(Kind::kHybrid)).find("fix: give a transformer draft"), std::string::npos);
}

}  // namespace
}  // namespace graphed::infer::draft_tests
