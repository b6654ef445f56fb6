// tests/util/text_test.cpp — join/split, edit distance, suggestions, number formatting.
#include "graphed/util/text.h"

#include <cmath>

#include <gtest/gtest.h>

namespace graphed {
namespace {

TEST(TextTest, SplitTrimsAndDropsEmptyPieces) {
  EXPECT_EQ(split(" attn, mlp,,moe_router ", ','), (std::vector<std::string>{"attn", "mlp", "moe_router"}));
  EXPECT_TRUE(split("", ',').empty());
  EXPECT_EQ(join({"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(join({}, ", "), "");
}

TEST(TextTest, EditDistanceCountsInsertionsDeletionsSubstitutions) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("same", "same"), 0u);
}

TEST(TextTest, NearestMatchSuggestsOnlyPlausibleTypos) {
  const std::vector<std::string> flags{"--num-layers", "--hidden-size", "--num-attention-heads"};
  EXPECT_EQ(nearest_match("--num-layer", flags), std::optional<std::string>("--num-layers"));
  EXPECT_EQ(nearest_match("--hiden-size", flags), std::optional<std::string>("--hidden-size"));
  EXPECT_EQ(nearest_match("--completely-different", flags), std::nullopt);
}

TEST(TextTest, FormatNumberIsShortestExact) {
  EXPECT_EQ(format_number(0.1), "0.1");
  EXPECT_EQ(format_number(1e-5), "1e-05");
  EXPECT_EQ(format_number(3.0), "3");
  EXPECT_EQ(format_number(0.001), "0.001");
  EXPECT_EQ(format_number(10000.0), "10000");
  EXPECT_EQ(format_number(-1.0), "-1");
}

TEST(TextTest, BracketedIntegers) {
  EXPECT_EQ(bracketed({}), "[]");
  EXPECT_EQ(bracketed({8, 128, -1}), "[8, 128, -1]");
}

TEST(TextTest, QuotedOneLineKeepsUtf8AndHidesControlCharacters) {
  EXPECT_EQ(quoted_one_line("Le pr\xC3\xA9sident\n\x01\t!"),
            "\"Le pr\xC3\xA9sident|?"
            "?!\"");
}

}  // namespace
TEST(TextTest, LibraryTagIsDroppedFromAWrappedMessage) {
  EXPECT_EQ(without_library_tag("[json.exception.out_of_range.406] number overflow parsing '1e999'"),
            "number overflow parsing '1e999'");
  EXPECT_EQ(without_library_tag("no tag here"), "no tag here");
}

TEST(TextTest, CountsTakeAPluralNoun) {
  EXPECT_EQ(counted(0, "tensor"), "0 tensors");
  EXPECT_EQ(counted(1, "tensor"), "1 tensor");
  EXPECT_EQ(counted(7, "bench file"), "7 bench files");
}

TEST(TextTest, ThousandsAreGrouped) {
  EXPECT_EQ(group_thousands(0), "0");
  EXPECT_EQ(group_thousands(999.4), "999");
  EXPECT_EQ(group_thousands(12345.6), "12,346");
  EXPECT_EQ(group_thousands(-1234567), "-1,234,567");
}

TEST(TextTest, NonFiniteNumbersAreNamed) {
  EXPECT_EQ(format_number(std::nan("")), "nan");
  EXPECT_EQ(format_number(HUGE_VAL), "inf");
  EXPECT_EQ(format_number(-HUGE_VAL), "-inf");
}

}  // namespace graphed
