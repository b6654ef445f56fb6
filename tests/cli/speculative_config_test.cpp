// tests/cli/speculative_config_test.cpp — `--speculative-config` read as vLLM reads it (ngram's lookup defaults: 5
// and 5, or the one given for both), and every mistake refused with the field, the value and the fix.
#include "graphed/cli/speculative_config.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "graphed/util/error.h"

namespace graphed::cli {
namespace {

std::string refusal(const std::string& text) {
  return testing::error_text<ConfigError>([&] { parse_speculative_config(text); });
}

TEST(SpeculativeConfig, ReadsNgramWithVllmsDefaults) {
  EXPECT_FALSE(parse_speculative_config("").enabled());
  const auto both = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3})");
  EXPECT_TRUE(both.enabled());
  EXPECT_EQ(both.tokens(), 3);
  EXPECT_EQ(both.lookup.longest, 5);
  EXPECT_EQ(both.lookup.shortest, 5);
  const auto longest = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 5,
                                                    "prompt_lookup_max": 4})");
  EXPECT_EQ(longest.lookup.longest, 4);
  EXPECT_EQ(longest.lookup.shortest, 4);
  const auto range = parse_speculative_config(R"({"method": "[ngram]", "num_speculative_tokens": 2,
                                                  "prompt_lookup_max": 4, "prompt_lookup_min": 1})");
  EXPECT_EQ(range.lookup.longest, 4);
  EXPECT_EQ(range.lookup.shortest, 1);
}

TEST(SpeculativeConfig, ReadsADraftModelWithOrWithoutItsMethod) {
  const auto draft =
      parse_speculative_config(R"({"method": "draft_model", "model": "ck", "num_speculative_tokens": 4})");
  EXPECT_EQ(draft.method, infer::SpeculativeDecoding::Method::kDraftModel);
  EXPECT_EQ(draft.tokens(), 4);
  EXPECT_EQ(draft.draft_model, "ck");
  EXPECT_EQ(draft.draft, nullptr);  // the caller loads it (cli/draft_model.h)
  const auto implied = parse_speculative_config(R"({"model": "/m/small", "num_speculative_tokens": 2})");
  EXPECT_EQ(implied.method, infer::SpeculativeDecoding::Method::kDraftModel);
  EXPECT_EQ(implied.draft_model, "/m/small");
}

TEST(SpeculativeConfig, RefusesADraftModelsMistakes) {
  EXPECT_NE(refusal(R"({"method": "draft_model", "num_speculative_tokens": 4})")
                .find("the draft_model method needs a model; fix: give the draft's folder"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method": "draft_model", "model": 3, "num_speculative_tokens": 4})").find("model is 3; fix:"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method": "draft_model", "model": "d"})").find("num_speculative_tokens is missing"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method": "draft_model", "model": "d", "num_speculative_tokens": 17})")
                .find("num_speculative_tokens is 17; fix: give an integer from 1 to 16"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method": "draft_model", "model": "d", "num_speculative_tokens": 2, "prompt_lookup_max": 3})")
                .find("prompt_lookup_max belongs to the ngram method; fix: drop it"),
            std::string::npos);
}

TEST(SpeculativeConfig, RefusesMistakesWithTheFieldAndTheFix) {
  EXPECT_NE(refusal("ngram").find("--speculative-config: 'ngram' is not a JSON object; fix: give one, like"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"num_speculative_tokens": 4})").find("no method is given"), std::string::npos);
  EXPECT_NE(refusal(R"({"method": 1, "num_speculative_tokens": 4})")
                .find("method is 1; fix: give \"ngram\" or \"draft_model\""),
            std::string::npos);
  EXPECT_NE(
      refusal(R"({"method": "eagle3", "num_speculative_tokens": 4})").find("the method 'eagle3' is not built yet"),
      std::string::npos);
  EXPECT_NE(refusal(R"({"method": "ngram"})").find("num_speculative_tokens is missing"), std::string::npos);
  EXPECT_NE(refusal(R"({"method": "ngram", "num_speculative_tokens": 0})")
                .find("num_speculative_tokens is 0; fix: give an integer from 1 to 16"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method": "ngram", "num_speculative_tokens": 2.5})").find("num_speculative_tokens is 2.5"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 2,
                        "prompt_lookup_min": 3})")
                .find("prompt_lookup_min 3 is above prompt_lookup_max 2"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method": "ngram", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1})")
                .find("does not know the field 'draft_tensor_parallel_size'"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method": "ngram", "num_speculative_tokens": 2, "model": "x"})")
                .find("the ngram method takes no model"),
            std::string::npos);
}

}  // namespace
}  // namespace graphed::cli
