// tests/train/progress_test.cpp — a run that writes to a file or pipe prints a short heartbeat when it
// has been quiet, with elapsed time, ETA and tokens seen; durations read as people write them.
#include "graphed/train/progress.h"

#include <sstream>

#include <gtest/gtest.h>

namespace graphed::train {
namespace {

TEST(ProgressTest, DurationsReadAsPeopleWriteThem) {
  EXPECT_EQ(Progress::duration(0.4), "0s");
  EXPECT_EQ(Progress::duration(59.4), "59s");
  EXPECT_EQ(Progress::duration(125), "2m05s");
  EXPECT_EQ(Progress::duration(7260), "2h01m");
}

TEST(ProgressTest, OffATerminalAQuietRunPrintsAHeartbeat) {
  std::ostringstream out;
  Progress progress(0, 100, 64, out, /*bar=*/false, /*out_is_terminal=*/false, /*heartbeat=*/std::chrono::seconds(0));
  progress.update(10);
  const std::string line = out.str();
  EXPECT_EQ(line.rfind("  ... iteration 10/100, ", 0), 0u) << line;
  EXPECT_NE(line.find(" elapsed, ETA "), std::string::npos) << line;
  EXPECT_NE(line.find(", 640 tokens seen\n"), std::string::npos) << line;
  progress.update(100);  // the last iteration has its own log line
  EXPECT_EQ(out.str(), line);
}

TEST(ProgressTest, ALogLineResetsTheQuietClock) {
  std::ostringstream out;
  Progress progress(0, 100, 64, out, /*bar=*/false, /*out_is_terminal=*/false, /*heartbeat=*/std::chrono::seconds(3600));
  progress.before_line();
  progress.update(50);
  EXPECT_EQ(out.str(), "");
}

TEST(ProgressTest, NoHeartbeatWhenTheOutputIsATerminal) {
  std::ostringstream out;
  Progress progress(0, 100, 64, out, /*bar=*/false, /*out_is_terminal=*/true, /*heartbeat=*/std::chrono::seconds(0));
  progress.update(10);
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace graphed::train
