// tests/serve/stop_strings_test.cpp — StopStrings: text is handed on at once unless it may begin a stop
// string; a stop string split over pieces is found; nothing of it or after it comes out.
#include <gtest/gtest.h>

#include "graphed/serve/stop_strings.h"

namespace graphed::serve {
namespace {

TEST(StopStringsTest, PassesTextThroughWithoutStops) {
  StopStrings stops({});
  EXPECT_EQ(stops.push("Hello").text, "Hello");
  EXPECT_EQ(stops.push(" world").text, " world");
  EXPECT_EQ(stops.finish(), "");
}

TEST(StopStringsTest, HoldsBackAPossibleStartAndReleasesItWhenItIsNot) {
  StopStrings stops({"END"});
  EXPECT_EQ(stops.push("the E").text, "the ");
  const auto piece = stops.push("nd");
  EXPECT_FALSE(piece.stopped);
  EXPECT_EQ(piece.text, "End");
  EXPECT_EQ(stops.push("EN").text, "");
  EXPECT_EQ(stops.finish(), "EN");
}

TEST(StopStringsTest, FindsAStopSplitOverPiecesAndDropsItAndWhatFollows) {
  StopStrings stops({"\n\n", "END"});
  EXPECT_EQ(stops.push("one E").text, "one ");
  const auto piece = stops.push("ND and more");
  EXPECT_TRUE(piece.stopped);
  EXPECT_EQ(piece.text, "");
  EXPECT_TRUE(stops.push("later").stopped);
  EXPECT_EQ(stops.finish(), "");
}

TEST(StopStringsTest, TheEarliestStopWins) {
  StopStrings stops({"world", "lo"});
  const auto piece = stops.push("hello world");
  EXPECT_TRUE(piece.stopped);
  EXPECT_EQ(piece.text, "hel");
}

TEST(StopStringsTest, KeepsMultibyteCharactersWhole) {
  StopStrings stops({"\xC3\xA9t\xC3\xA9"});          // "été"
  EXPECT_EQ(stops.push("caf\xC3\xA9").text, "caf");  // "é" may begin the stop
  const auto piece = stops.push("!");
  EXPECT_EQ(piece.text, "\xC3\xA9!");
}

}  // namespace
}  // namespace graphed::serve
