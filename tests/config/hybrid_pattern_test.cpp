// tests/config/hybrid_pattern_test.cpp — hybrid layer allocation as Megatron's allocate_layers does it:
// the ratio cases of its own examples (10 layers at 0.3 / 0.2 give "MM*M-*M*M-"; 48 at 0.25 / 0.25),
// a tie rounded to even, patterns kept as given, and the refusals: a bad symbol, a wrong length, counts
// that contradict the ratios, ratios out of range, a multi-token-prediction part.
#include <gtest/gtest.h>

#include "graphed/config/hybrid_pattern.h"
#include "graphed/util/error.h"

namespace graphed::config {
namespace {

TEST(HybridPatternTest, RatiosSpreadTheLayersAsMegatronDoes) {
  EXPECT_EQ(allocate_hybrid_layers(4, 0.0, 0.0, std::nullopt), "MMMM");
  EXPECT_EQ(allocate_hybrid_layers(10, 0.2, 0.0, std::nullopt), "MMM*MM*MMM");
  EXPECT_EQ(allocate_hybrid_layers(10, 0.0, 0.3, std::nullopt), "MM-MMM-MM-");
  EXPECT_EQ(allocate_hybrid_layers(10, 0.3, 0.2, std::nullopt), "MM*M-*M*M-");
  EXPECT_EQ(allocate_hybrid_layers(48, 0.25, 0.25, std::nullopt), "MM-*MM-*MM*-MM*-MM*-MM*-M*M-M*M-M*M-M*M-*MM-*MM-");
  EXPECT_EQ(allocate_hybrid_layers(5, 0.5, 0.5, std::nullopt), "M*-*-");  // 2.5 rounds to 2, as Python's round
}

TEST(HybridPatternTest, APatternIsKeptWhenItsCountsFit) {
  EXPECT_EQ(allocate_hybrid_layers(9, 0.0, 0.0, std::string("M*-M*-M*-")), "M*-M*-M*-");
  EXPECT_EQ(allocate_hybrid_layers(4, 0.0, 0.0, std::string("ME*E")), "ME*E");
  EXPECT_EQ(allocate_hybrid_layers(10, 0.3, 0.2, std::string("MMM*-*M*M-")), "MMM*-*M*M-");  // same counts, moved
}

TEST(HybridPatternTest, BadPatternsAndRatiosAreRefusedNamingTheFlag) {
  const auto refusal = [](int64_t layers, double attention, double mlp, const std::optional<std::string>& pattern) {
    try {
      allocate_hybrid_layers(layers, attention, mlp, pattern);
    } catch (const ConfigError& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(4, 0.0, 0.0, std::string("MX*M")).find("'X', which is no layer kind"), std::string::npos);
  EXPECT_NE(refusal(4, 0.0, 0.0, std::string("M*M")).find("has 3 layers, but --num-layers is 4"), std::string::npos);
  EXPECT_NE(refusal(10, 0.3, 0.2, std::string("MMMMMMMM*-")).find("does not have the layer counts"), std::string::npos);
  EXPECT_NE(refusal(4, 0.7, 0.5, std::nullopt).find("--hybrid-attention-ratio"), std::string::npos);
  EXPECT_NE(refusal(4, -0.1, 0.0, std::nullopt).find("fix:"), std::string::npos);
  EXPECT_NE(refusal(4, 0.0, 0.0, std::string("M*M*/MM")).find("multi-token-prediction"), std::string::npos);
}

}  // namespace
}  // namespace graphed::config
