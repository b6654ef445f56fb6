// tests/cli/bench_serve_test.cpp — bench --serve on the CPU: length ranges and their errors, the seeded
// workload (uniform within the range, long-tail mostly low, Poisson arrivals in order), percentiles by
// nearest rank, and a small run whose JSON has the fields bench/serve_reference.py and the issue need.
#include "graphed/cli/bench_serve.h"

#include <gtest/gtest.h>

#include <fstream>

#include <sstream>

#include <nlohmann/json.hpp>

#include "graphed/cli/bench_command.h"
#include "graphed/util/error.h"

namespace graphed::cli {
namespace {

TEST(BenchServe, LengthRangesAndTheirErrors) {
  EXPECT_EQ(parse_length_range("64..2048", "--prompt-lengths"), std::make_pair(int64_t{64}, int64_t{2048}));
  EXPECT_EQ(parse_length_range("7", "--output-lengths"), std::make_pair(int64_t{7}, int64_t{7}));
  for (const std::string bad : {"0..4", "9..3", "a..b", "4..", "3x", ""}) {
    try {
      parse_length_range(bad, "--prompt-lengths");
      ADD_FAILURE() << bad;
    } catch (const ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find("--prompt-lengths is '" + bad + "'; fix: give A..B"), std::string::npos);
    }
  }
}

TEST(BenchServe, TheWorkloadIsSeededAndStaysInItsRanges) {
  ServeBenchFlags flags;
  flags.requests = 400;
  flags.prompt_lengths = "10..20";
  flags.output_lengths = "5..5";
  const ServeWorkload first = make_workload(flags, 3);
  EXPECT_EQ(first.prompt_lengths, make_workload(flags, 3).prompt_lengths);
  EXPECT_NE(first.prompt_lengths, make_workload(flags, 4).prompt_lengths);
  EXPECT_EQ(*std::min_element(first.prompt_lengths.begin(), first.prompt_lengths.end()), 10);
  EXPECT_EQ(*std::max_element(first.prompt_lengths.begin(), first.prompt_lengths.end()), 20);
  for (const double arrival : first.arrival_seconds) EXPECT_EQ(arrival, 0.0);
  flags.prompt_lengths = "100..900";
  flags.distribution = "long-tail";
  flags.request_rate = 10;
  const ServeWorkload tail = make_workload(flags, 3);
  const auto low =
      std::count_if(tail.prompt_lengths.begin(), tail.prompt_lengths.end(), [](int64_t l) { return l < 300; });
  EXPECT_GT(low, 300);  // an exponential of mean 100 above 100: about 86% below 300
  EXPECT_TRUE(std::is_sorted(tail.arrival_seconds.begin(), tail.arrival_seconds.end()));
  EXPECT_GT(tail.arrival_seconds.back(), 20.0);  // 400 requests at 10 per second: about 40 s
  flags.distribution = "zipf";
  EXPECT_THROW(make_workload(flags, 3), ConfigError);
}

TEST(BenchServe, ASmallRunReportsWhatTheIssueAsksFor) {
  std::ostringstream out;
  const int status = run_bench(parse_command_line({"bench", "--serve", "--preset", "tiny", "--device", "cpu",
                                                   "--requests", "6", "--prompt-lengths", "3..30", "--output-lengths",
                                                   "2..9", "--inference-max-requests", "2", "--json"}),
                               out);
  EXPECT_EQ(status, 0);
  const auto result = nlohmann::json::parse(out.str());
  for (const char* key : {"requests", "output_tokens_per_second", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50",
                          "tpot_ms_p99", "requests_per_second", "seconds", "model_shape", "workload", "engine"}) {
    EXPECT_TRUE(result.contains(key)) << key;
  }
  int64_t wanted = 0;
  for (const auto& length : result["workload"]["output_lengths"]) wanted += length.get<int64_t>();
  EXPECT_EQ(result["output_tokens"].get<int64_t>(), wanted);
  EXPECT_EQ(result["engine"]["max_requests"], 2);
  EXPECT_GT(result["engine"]["steps"].get<int64_t>(), 0);
  EXPECT_GE(result["ttft_ms_p99"].get<double>(), result["ttft_ms_p50"].get<double>());
}

/// tiny's context is 64 positions: the default workload (prompts 64..2048) cannot run at all and is refused up
/// front, naming the flags; one that partly fits runs, its refusals counted, and exits 0.
TEST(BenchServe, AWorkloadThatCannotFitIsRefusedAndOneThatPartlyFitsRuns) {
  std::ostringstream out;
  try {
    run_bench(parse_command_line({"bench", "--serve", "--preset", "tiny", "--device", "cpu"}), out);
    ADD_FAILURE() << "the default workload ran on tiny";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()),
              "bench --serve: none of the 64 requests (prompts 64..2048 tokens, outputs 32..512) can run; the first "
              "refused: "
              "the prompt has 1944 tokens, and the context holds 64 positions, the prompt's and the new tokens'; fix: "
              "pass --prompt-lengths and --output-lengths whose sums fit the context of 64 positions, e.g. "
              "--prompt-lengths 8..32 --output-lengths 4..32");
  }
  EXPECT_EQ(out.str(), "");
  const int status =
      run_bench(parse_command_line({"bench", "--serve", "--preset", "tiny", "--device", "cpu", "--requests", "8",
                                    "--prompt-lengths", "20..60", "--output-lengths", "10", "--json"}),
                out);
  EXPECT_EQ(status, 0);
  const auto result = nlohmann::json::parse(out.str());
  int64_t fitting = 0, wanted = 0;
  for (const auto& length : result["workload"]["prompt_lengths"]) {
    if (length.get<int64_t>() + 10 <= 64) ++fitting, wanted += 10;
  }
  ASSERT_GT(fitting, 0);
  ASSERT_LT(fitting, 8);
  EXPECT_EQ(result["refused_requests"].get<int64_t>(), 8 - fitting);
  EXPECT_EQ(result["output_tokens"].get<int64_t>(), wanted);
}

/// --temperature samples every request with a seed of its own; the report says how it sampled.
TEST(BenchServe, SampledRequestsDrawTheirWholeLengths) {
  std::ostringstream out;
  const std::vector<std::string> arguments{
      "bench",         "--serve", "--preset",         "tiny",  "--device",         "cpu",
      "--requests",    "4",       "--prompt-lengths", "3..20", "--output-lengths", "5",
      "--temperature", "1",       "--top-p",          "0.9"};
  EXPECT_EQ(run_bench(parse_command_line(arguments), out), 0);
  EXPECT_NE(out.str().find("all at once, temperature 1, top-p 0.9) on preset tiny"), std::string::npos) << out.str();
  std::vector<std::string> json_arguments = arguments;
  json_arguments.push_back("--json");
  std::ostringstream json_out;
  EXPECT_EQ(run_bench(parse_command_line(json_arguments), json_out), 0);
  const auto result = nlohmann::json::parse(json_out.str());
  EXPECT_EQ(result["output_tokens"].get<int64_t>(), 4 * 5);
  EXPECT_EQ(result["sampling"]["top_p"].get<double>(), 0.9);
  std::ostringstream bad;
  EXPECT_THROW(
      run_bench(parse_command_line({"bench", "--serve", "--preset", "tiny", "--device", "cpu", "--temperature", "-1"}),
                bad),
      ConfigError);
}

/// bench --serve of 3 requests of 4..9 prompt tokens and `output` new tokens on the CPU's tiny preset, with `more`.
std::vector<std::string> small_run(int64_t output, const std::vector<std::string>& more) {
  std::vector<std::string> arguments{
      "bench",      "--serve", "--preset",         "tiny", "--device",         "cpu",
      "--requests", "3",       "--prompt-lengths", "4..9", "--output-lengths", std::to_string(output)};
  arguments.insert(arguments.end(), more.begin(), more.end());
  return arguments;
}

/// --speculative-config: the workload's whole lengths drawn, the figures in the JSON and the text line.
TEST(BenchServe, SpeculationReportsWhatItProposedAndKept) {
  std::vector<std::string> arguments =
      small_run(40, {"--speculative-config", R"({"method": "ngram", "num_speculative_tokens": 3,
                                                 "prompt_lookup_max": 2, "prompt_lookup_min": 1})"});
  std::ostringstream text;
  EXPECT_EQ(run_bench(parse_command_line(arguments), text), 0);
  EXPECT_NE(text.str().find("speculation: ngram, "), std::string::npos) << text.str();
  arguments.push_back("--json");
  std::ostringstream out;
  EXPECT_EQ(run_bench(parse_command_line(arguments), out), 0);
  const auto result = nlohmann::json::parse(out.str());
  EXPECT_EQ(result["output_tokens"].get<int64_t>(), 3 * 40);
  const auto& figures = result["engine"]["speculative"];
  EXPECT_EQ(figures["num_speculative_tokens"].get<int64_t>(), 3);
  EXPECT_GT(figures["draft_tokens"].get<int64_t>(), 0) << figures.dump();
  EXPECT_LE(figures["accepted_tokens"].get<int64_t>(), figures["draft_tokens"].get<int64_t>());
}

/// --logprobs and --json-schema decorate every request: the whole output lengths are drawn (documents back to back),
/// every step masked; a schema outside the subset and a logprobs count out of range are refused naming the flag.
TEST(BenchServe, LogprobsAndASchemaDecorateEveryRequestAndBadOnesAreRefused) {
  const std::string schema = std::string(GRAPHED_SOURCE_DIR) + "/bench/schemas/person.json";
  const std::vector<std::string> arguments = small_run(12, {"--json-schema", schema, "--logprobs", "5", "--json"});
  std::ostringstream out;
  EXPECT_EQ(run_bench(parse_command_line(arguments), out), 0);
  const auto result = nlohmann::json::parse(out.str());
  EXPECT_EQ(result["output_tokens"].get<int64_t>(), 3 * 12);
  EXPECT_EQ(result["logprobs"].get<int64_t>(), 5);
  EXPECT_GT(result["engine"]["masked_steps"].get<int64_t>(), 0);
  const auto refusal = [](std::vector<std::string> given) {
    std::vector<std::string> command{"bench", "--serve", "--preset", "tiny", "--device", "cpu"};
    command.insert(command.end(), given.begin(), given.end());
    std::ostringstream ignored;
    try {
      run_bench(parse_command_line(command), ignored);
    } catch (const ConfigError& error) {
      return std::string(error.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(refusal({"--logprobs", "21"}).find("--logprobs is 21"), std::string::npos);
  EXPECT_NE(
      refusal({"--json-schema", "/no/such/schema.json"}).find("--json-schema /no/such/schema.json cannot be read"),
      std::string::npos);
  const std::string unsupported = ::testing::TempDir() + "/minimum_schema.json";
  {
    std::ofstream file(unsupported);
    file << R"({"type": "integer", "minimum": 0})";
  }
  EXPECT_NE(refusal({"--json-schema", unsupported}).find("'minimum'"), std::string::npos);
}

/// --profile-phase mixed and decode run the profile's loaded steps after the timed run, which they leave as it was;
/// an unknown phase is refused up front.
TEST(BenchServe, ProfilePhasesRunAfterTheTimedRunAndAnUnknownOneIsRefused) {
  const std::vector<std::string> arguments{"bench",    "--serve",
                                           "--preset", "tiny",
                                           "--device", "cpu",
                                           "--json",   "--prompt-lengths",
                                           "3..20",    "--output-lengths",
                                           "5",        "--requests",
                                           "4",        "--profile-iterations",
                                           "2"};
  for (const std::string phase : {"mixed", "decode", "one-request"}) {
    std::vector<std::string> with_phase = arguments;
    with_phase.insert(with_phase.end(), {"--profile-phase", phase});
    std::ostringstream out;
    EXPECT_EQ(run_bench(parse_command_line(with_phase), out), 0) << phase;
    EXPECT_EQ(nlohmann::json::parse(out.str())["output_tokens"].get<int64_t>(), 4 * 5) << phase;
  }
  std::vector<std::string> bad = arguments;
  bad.insert(bad.end(), {"--profile-phase", "prefill"});
  std::ostringstream out;
  try {
    run_bench(parse_command_line(bad), out);
    ADD_FAILURE() << "an unknown profile phase ran";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()), "--profile-phase is 'prefill'; fix: give one-request, mixed or decode");
  }
}

TEST(BenchServe, ItsFlagsWithoutServeAreRefused) {
  std::ostringstream out;
  for (const std::vector<std::string> arguments :
       {std::vector<std::string>{"bench", "--preset", "tiny", "--device", "cpu", "--requests", "8"},
        std::vector<std::string>{"bench", "--preset", "tiny", "--device", "cpu", "--inference-max-requests", "8"},
        std::vector<std::string>{"bench", "--preset", "tiny", "--device", "cpu", "--temperature", "1"},
        std::vector<std::string>{"bench", "--preset", "tiny", "--device", "cpu", "--decode", "--speculative-config",
                                 R"({"method": "ngram", "num_speculative_tokens": 2})"}}) {
    try {
      run_bench(parse_command_line(arguments), out);
      ADD_FAILURE() << arguments.back();
    } catch (const ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find("without --serve, where it does nothing; fix: add --serve"),
                std::string::npos)
          << error.what();
    }
  }
  EXPECT_THROW(run_bench(parse_command_line({"bench", "--preset", "tiny", "--decode", "--serve"}), out), ConfigError);
}

}  // namespace
}  // namespace graphed::cli
