// tests/train/progress_test.cpp — a run whose output is a file or pipe gets a short heartbeat line
// whenever it has been quiet, from a watcher thread (so a long iteration or evaluation is covered too),
// with elapsed time, ETA and tokens seen; printed lines restart the quiet clock; durations read as
// people write them.
#include "graphed/train/progress.h"

#include <mutex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace graphed::train {
namespace {

/// An output stream whose text can be read while another thread writes to it.
class SharedText : public std::streambuf {
 public:
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return 0;
    std::lock_guard<std::mutex> lock(mutex_);
    text_.push_back(static_cast<char>(c));
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(mutex_);
    text_.append(s, static_cast<std::size_t>(n));
    return n;
  }

 private:
  std::mutex mutex_;
  std::string text_;
};

TEST(ProgressTest, DurationsReadAsPeopleWriteThem) {
  EXPECT_EQ(Progress::duration(0.4), "0s");
  EXPECT_EQ(Progress::duration(59.4), "59s");
  EXPECT_EQ(Progress::duration(125), "2m05s");
  EXPECT_EQ(Progress::duration(7260), "2h01m");
}

TEST(ProgressTest, OffATerminalAQuietRunPrintsAHeartbeatWhileAnIterationRuns) {
  SharedText shared;
  std::ostream out(&shared);
  {
    Progress progress(0, 100, 64, out, /*bar=*/false, /*out_is_terminal=*/false, std::chrono::milliseconds(10));
    progress.update(10);
    // The main thread is busy (an iteration, an evaluation); the watcher speaks. Wait for its line.
    // (On a loaded machine it may already have spoken once at iteration 0, before update(10) ran.)
    for (int tries = 0; tries < 500 && shared.text().find("640 tokens seen") == std::string::npos; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const std::string text = shared.text();
  const std::size_t line = text.find("  ... iteration 10/100, ");
  ASSERT_NE(line, std::string::npos) << text;
  EXPECT_TRUE(line == 0 || text[line - 1] == '\n') << text;
  EXPECT_NE(text.find(" elapsed, ETA ", line), std::string::npos) << text;
  EXPECT_NE(text.find(", 640 tokens seen\n", line), std::string::npos) << text;
}

TEST(ProgressTest, APrintedLineRestartsTheQuietClock) {
  std::ostringstream out;
  {
    Progress progress(0, 100, 64, out, /*bar=*/false, /*out_is_terminal=*/false, std::chrono::hours(1));
    progress.print_line("iteration 50/100 | ...");
    progress.update(50);
  }
  EXPECT_EQ(out.str(), "iteration 50/100 | ...\n");
}

TEST(ProgressTest, NoHeartbeatWhenTheOutputIsATerminal) {
  std::ostringstream out;
  {
    Progress progress(0, 100, 64, out, /*bar=*/false, /*out_is_terminal=*/true, std::chrono::milliseconds(0));
    progress.update(10);
  }
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace graphed::train
