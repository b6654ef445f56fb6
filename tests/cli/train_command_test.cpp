// tests/cli/train_command_test.cpp — `graphed train` end to end on a few CPU iterations, and the
// impls it refuses, with their messages.
#include "graphed/cli/train_command.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph_support_for_test.h"
#include "graphed/train/trainer.h"

#include "graphed/util/build_info.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::cli {
namespace {

std::string train_error(std::vector<std::string> arguments) {
  arguments.insert(arguments.begin(), "train");
  std::ostringstream out;
  try {
    run_train(parse_command_line(arguments), out);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(TrainCommandTest, TrainsAFewIterationsOnMockData) {
  std::ostringstream out;
  const int code = run_train(parse_command_line({"train", "--mock-data", "--train-iters", "4", "--log-interval", "2",
                                                 "--eval-iters", "1", "--eval-interval", "4", "--device", "cpu"}),
                             out);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.str().find("data: mock data"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("iteration      4/4"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("done: 4 iterations"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("note: no samples: graphed reads text only through its byte-level tokenizer, and this "
                           "data is token ids"),
            std::string::npos)
      << out.str();
}

TEST(TrainCommandTest, ByteLevelRunSamplesAtEachEvaluationAndEndsWithTimeAndSpeed) {
  const std::string corpus = make_temporary_directory("graphed-train-command") + "/text.txt";
  std::ofstream(corpus) << std::string(4000, 'a') + "The quick brown fox jumps over the lazy dog. ";
  std::ostringstream out;
  run_train(
      parse_command_line(
          {"train", "--data-path",           corpus, "--device",        "cpu", "--num-layers", "1",   "--hidden-size",
           "32",    "--num-attention-heads", "2",    "--seq-length",    "16",  "--vocab-size", "256", "--train-iters",
           "4",     "--log-interval",        "2",    "--eval-interval", "2",   "--eval-iters", "1",   "--sample-tokens",
           "8",     "--sample-prompt",       "Th"}),
      out);
  const std::string text = out.str();
  EXPECT_NE(text.find("(format: text, byte-level tokenizer)"), std::string::npos) << text;
  EXPECT_NE(text.find("MFU is measured against CPU estimate: "), std::string::npos) << text;
  EXPECT_NE(text.find(" TFLOP/s | MFU "), std::string::npos) << text;
  EXPECT_NE(text.find("sample at iteration 2: \"Th"), std::string::npos) << text;
  EXPECT_NE(text.find("sample at iteration 4: \"Th"), std::string::npos) << text;
  EXPECT_NE(text.find("done: 4 iterations in "), std::string::npos) << text;
  EXPECT_NE(text.find(" s, 64 tokens at "), std::string::npos) << text;
}

/// A small byte-level corpus (4,000 a's and a sentence) in a folder of its own.
std::string small_corpus() {
  const std::string corpus = make_temporary_directory("graphed-train-command") + "/text.txt";
  std::ofstream(corpus) << std::string(4000, 'a') + "The quick brown fox jumps over the lazy dog. ";
  return corpus;
}

/// `graphed train` of a 1-layer byte-level model on small_corpus(), with more flags.
std::string train_small(const std::string& corpus, std::vector<std::string> flags) {
  std::vector<std::string> arguments{
      "train", "--data-path",           corpus, "--device",     "cpu", "--num-layers",       "1", "--hidden-size",
      "32",    "--num-attention-heads", "2",    "--seq-length", "16",  "--micro-batch-size", "4"};
  arguments.insert(arguments.end(), flags.begin(), flags.end());
  std::ostringstream out;
  run_train(parse_command_line(arguments), out);
  return out.str();
}

TEST(TrainCommandTest, JsonPrintsOneObjectPerEventAndASummary) {
  const std::string corpus = small_corpus();
  const std::string save = make_temporary_directory("graphed-train-json") + "/run";
  ::testing::internal::CaptureStderr();
  const std::string text =
      train_small(corpus, {"--train-iters", "4", "--log-interval", "2", "--eval-interval", "2", "--eval-iters", "1",
                           "--sample-tokens", "4", "--save", save, "--save-interval", "2", "--json"});
  const std::string notes = ::testing::internal::GetCapturedStderr();
  std::istringstream lines(text);
  std::string line;
  std::vector<std::string> events;
  nlohmann::json done;
  while (std::getline(lines, line)) {
    nlohmann::json object;
    ASSERT_NO_THROW(object = nlohmann::json::parse(line)) << "not one JSON object: " << line;
    events.push_back(object.at("event"));
    if (events.back() == "interval") {
      for (const char* key : {"iteration", "lr", "loss", "grad_norm", "ms_per_iter", "tokens_per_s", "tflops"}) {
        EXPECT_TRUE(object.contains(key)) << key << " missing from " << line;
      }
    }
    if (events.back() == "done") done = object;
  }
  EXPECT_EQ(events, (std::vector<std::string>{"data", "model", "interval", "checkpoint", "validation", "sample",
                                              "interval", "checkpoint", "validation", "sample", "done"}))
      << text;
  EXPECT_EQ(done.at("iterations"), 4);
  EXPECT_EQ(done.at("last_iteration"), 4);
  EXPECT_EQ(done.at("tokens"), 256.0);
  EXPECT_EQ(done.at("stopped"), false);
  EXPECT_TRUE(done.contains("final_loss") && done.contains("final_valid_loss") && done.contains("tokens_per_s"))
      << done;
  EXPECT_EQ(text.find("note:"), std::string::npos) << "notes go to stderr with --json";
  (void)notes;
}

TEST(TrainCommandTest, AResumedRunCountsItsOwnWork) {
  const std::string corpus = small_corpus();
  const std::string save = make_temporary_directory("graphed-train-resume") + "/run";
  train_small(corpus, {"--train-iters", "4", "--log-interval", "2", "--eval-iters", "0", "--sample-tokens", "0",
                       "--save", save});
  const std::string text = train_small(corpus, {"--load", save, "--train-iters", "6", "--sample-tokens", "0"});
  EXPECT_NE(text.find("resumed from " + save + " at iteration 4\n"), std::string::npos) << text;
  // 2 iterations of 4 x 16 tokens: this run's, not the 6 since the start.
  EXPECT_NE(text.find("done: 2 iterations (5 to 6) in "), std::string::npos) << text;
  EXPECT_NE(text.find(" s, 128 tokens at "), std::string::npos) << text;
}

TEST(TrainCommandTest, SamplesShowTheirTextAsUtf8) {
  const std::string corpus = small_corpus();
  const std::string text =
      train_small(corpus, {"--train-iters", "2", "--log-interval", "2", "--eval-interval", "2", "--eval-iters", "1",
                           "--sample-tokens", "3", "--sample-prompt", "Le pr\xC3\xA9sident \xE4\xB8\x96\xE7\x95\x8C "});
  EXPECT_NE(text.find("sample at iteration 2: \"Le pr\xC3\xA9sident \xE4\xB8\x96\xE7\x95\x8C "), std::string::npos)
      << text;
}

TEST(TrainCommandTest, AMicroBatchTooLargeForTheMachineIsRefusedBeforeTraining) {
  const std::string message = train_error({"--preset", "tiny", "--micro-batch-size", "10000000", "--device", "cpu"});
  EXPECT_EQ(message.rfind("this run needs about ", 0), 0u) << message;
  EXPECT_NE(message.find("--micro-batch-size 10000000"), std::string::npos) << message;
  EXPECT_NE(message.find("; fix: lower --micro-batch-size to "), std::string::npos) << message;
}

TEST(TrainCommandTest, ASaveFolderThatIsAFileFailsBeforeTheFirstIteration) {
  const std::string file = make_temporary_directory("graphed-train-command") + "/not-a-folder";
  std::ofstream(file) << "x";
  EXPECT_EQ(train_error({"--mock-data", "--device", "cpu", "--save", file, "--save-interval", "100"}),
            "cannot write --save '" + file +
                "': it is a file, not a folder; fix: pass --save a folder you can write "
                "to (it is created if missing)");
}

TEST(TrainCommandTest, FullIterationNeedsACudaDevice) {
  const std::string why = graphed::testing::why_no_graphs_on_cpu();
  EXPECT_EQ(train_error({"--mock-data", "--cuda-graph-impl", "full_iteration", "--device", "cpu"}),
            "--cuda-graph-impl full_iteration needs CUDA graphs, but " + why +
                "; fix: --cuda-graph-impl none, or run on a GPU machine");
}

TEST(TrainCommandTest, TransformerEngineNeedsACudaDevice) {
  const std::string why = graphed::testing::why_no_graphs_on_cpu();
  EXPECT_EQ(train_error({"--mock-data", "--cuda-graph-impl", "transformer_engine", "--device", "cpu"}),
            "--cuda-graph-impl transformer_engine needs CUDA graphs, but " + why +
                "; fix: --cuda-graph-impl none, or run on a GPU machine");
}

TEST(TrainCommandTest, LocalNeedsACudaDevice) {
  const std::string why = graphed::testing::why_no_graphs_on_cpu();
  EXPECT_EQ(train_error({"--mock-data", "--cuda-graph-impl", "local", "--device", "cpu"}),
            "--cuda-graph-impl local needs CUDA graphs, but " + why +
                "; fix: --cuda-graph-impl none, or run on a GPU machine");
  // The legacy flag migrates to the same impl, and so to the same message.
  EXPECT_EQ(train_error({"--mock-data", "--enable-cuda-graph", "--device", "cpu"}),
            "--cuda-graph-impl local needs CUDA graphs, but " + why +
                "; fix: --cuda-graph-impl none, or run on a GPU machine");
}

TEST(TrainCommandTest, InvalidConfigurationListsEveryError) {
  std::vector<std::string> arguments{"train", "--num-layers", "0", "--cuda-graph-warmup-steps", "0"};
  try {
    std::ostringstream out;
    run_train(parse_command_line(arguments), out);
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_STREQ(error.what(), "invalid configuration (2 errors)");
    ASSERT_EQ(error.details().size(), 2u);
  }
}

}  // namespace
}  // namespace graphed::cli
