// tests/util/statistics_test.cpp — the median and the nearest-rank percentile.
#include "graphed/util/statistics.h"

#include <gtest/gtest.h>

namespace graphed {
namespace {

TEST(StatisticsTest, MedianTakesTheMiddleOrTheMeanOfTheTwoMiddles) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({7.0}), 7.0);
}

TEST(StatisticsTest, PercentilesByNearestRank) {
  EXPECT_EQ(percentile({}, 0.5), 0.0);
  EXPECT_EQ(percentile({5.0, 1.0, 3.0, 2.0, 4.0}, 0.5), 3.0);
  EXPECT_EQ(percentile({5.0, 1.0, 3.0, 2.0, 4.0}, 0.99), 5.0);
  EXPECT_EQ(percentile({7.0}, 0.99), 7.0);
}

}  // namespace
}  // namespace graphed
