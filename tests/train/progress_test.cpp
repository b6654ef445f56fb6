// tests/train/progress_test.cpp — a run whose output is a file or pipe gets a short heartbeat line
// whenever it has been quiet, from a watcher thread (so a long iteration or evaluation is covered too),
// with elapsed time, ETA and tokens seen; printed lines restart the quiet clock; durations read as
// people write them.
#include "graphed/train/progress.h"

#include <mutex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
    EventLog log(out, LogFormat::kText);
    Progress progress(0, 100, 64, log, /*bar=*/false, /*out_is_terminal=*/false, std::chrono::milliseconds(10));
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
    EventLog log(out, LogFormat::kText);
    Progress progress(0, 100, 64, log, /*bar=*/false, /*out_is_terminal=*/false, std::chrono::hours(1));
    progress.print("interval", {{"iteration", 50}}, "iteration 50/100 | ...");
    progress.update(50);
  }
  EXPECT_EQ(out.str(), "iteration 50/100 | ...\n");
}

TEST(ProgressTest, NoHeartbeatWhenTheOutputIsATerminal) {
  std::ostringstream out;
  {
    EventLog log(out, LogFormat::kText);
    Progress progress(0, 100, 64, log, /*bar=*/false, /*out_is_terminal=*/true, std::chrono::milliseconds(0));
    progress.update(10);
  }
  EXPECT_EQ(out.str(), "");
}

TEST(ProgressTest, WithJsonEveryEventAndHeartbeatIsOneObjectPerLine) {
  SharedText shared;
  std::ostream out(&shared);
  {
    EventLog log(out, LogFormat::kJson);
    Progress progress(0, 100, 64, log, /*bar=*/false, /*out_is_terminal=*/false, std::chrono::milliseconds(10));
    progress.print("interval", {{"iteration", 5}, {"loss", 2.5}}, "iteration 5/100 | ...");
    progress.update(10);
    for (int tries = 0; tries < 500 && shared.text().find("\"heartbeat\"") == std::string::npos; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::istringstream lines(shared.text());
  std::string line;
  bool heartbeat = false, interval = false;
  while (std::getline(lines, line)) {
    const auto object = nlohmann::json::parse(line);  // every line is one JSON object
    if (object.at("event") == "interval") {
      interval = true;
      EXPECT_EQ(line, R"({"event":"interval","iteration":5,"loss":2.5})");
    }
    if (object.at("event") == "heartbeat") {  // (on a loaded machine, maybe one before the interval too)
      heartbeat = true;
      EXPECT_EQ(object.at("train_iters"), 100);
      EXPECT_TRUE(object.contains("elapsed_s") && object.contains("tokens_seen")) << line;
    }
  }
  EXPECT_TRUE(interval) << shared.text();
  EXPECT_TRUE(heartbeat) << shared.text();
}

TEST(EventLogTest, TextPrintsTheLineAndJsonTheFields) {
  std::ostringstream text_out, json_out;
  EventLog text(text_out, LogFormat::kText);
  EventLog json(json_out, LogFormat::kJson);
  text.print("validation", {{"iteration", 4}, {"valid_loss", 1.5}}, "validation loss at iteration 4: 1.5000");
  json.print("validation", {{"iteration", 4}, {"valid_loss", 1.5}}, "validation loss at iteration 4: 1.5000");
  text.note("no samples");
  ::testing::internal::CaptureStderr();
  json.note("no samples");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "note: no samples\n") << "notes stay out of the JSON";
  EXPECT_EQ(text_out.str(), "validation loss at iteration 4: 1.5000\nnote: no samples\n");
  EXPECT_EQ(json_out.str(), "{\"event\":\"validation\",\"iteration\":4,\"valid_loss\":1.5}\n");
  // Text that is not UTF-8 (a sample of a byte-level model) still makes valid JSON.
  std::ostringstream bytes_out;
  EventLog bytes(bytes_out, LogFormat::kJson);
  bytes.print("sample", {{"text", std::string("a\xff")}}, "");
  EXPECT_EQ(bytes_out.str(), "{\"event\":\"sample\",\"text\":\"a\xEF\xBF\xBD\"}\n");
}

}  // namespace
}  // namespace graphed::train
