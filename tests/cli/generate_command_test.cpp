// tests/cli/generate_command_test.cpp — `graphed generate` on the CPU: a model trained by graphed
// train on text continues a prompt through --load (text and --json output, greedy equal to the model's
// own recompute), and every user mistake gets a one-line error naming the flag and the fix.
#include "graphed/cli/generate_command.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "error_text.h"
#include "graph_support_for_test.h"
#include "graphed/cli/train_command.h"
#include "graphed/util/file_system.h"

namespace graphed::cli {
namespace {

/// A 1-layer byte-level model (a table of vocab_size ids) trained `iterations` iterations on a small
/// text and saved: the run folder.
std::string train_checkpoint(const std::string& vocab_size, const std::string& iterations) {
  const std::string dir = make_temporary_directory("graphed-generate-command");
  const std::string corpus = dir + "/text.txt";
  std::ofstream(corpus) << std::string(2000, 'a') + "The quick brown fox jumps over the lazy dog. ";
  std::ostringstream out;
  run_train(parse_command_line({"train",     "--data-path",           corpus,     "--device",
                                "cpu",       "--num-layers",          "1",        "--hidden-size",
                                "32",        "--num-attention-heads", "2",        "--seq-length",
                                "32",        "--vocab-size",          vocab_size, "--train-iters",
                                iterations,  "--log-interval",        "2",        "--eval-iters",
                                "0",         "--sample-tokens",       "0",        "--save",
                                dir + "/run"}),
            out);
  return dir + "/run";
}

/// The byte-level model of 256 ids trained 4 iterations, saved once.
const std::string& checkpoint() {
  static const std::string folder = train_checkpoint("256", "4");
  return folder;
}

std::string generate(std::vector<std::string> arguments) {
  arguments.insert(arguments.begin(), "generate");
  if (std::find(arguments.begin(), arguments.end(), "--device") == arguments.end()) {
    arguments.insert(arguments.end(), {"--device", "cpu"});  // the same on a GPU machine
  }
  std::ostringstream out;
  run_generate(parse_command_line(arguments), out);
  return out.str();
}

std::string generate_error(std::vector<std::string> arguments) {
  return testing::error_text<Error>([&] { generate(std::move(arguments)); });
}

TEST(GenerateCommandTest, ContinuesATextPromptFromACheckpoint) {
  const std::string text = generate({"--load", checkpoint(), "--prompt", "The q", "--max-new-tokens", "6"});
  EXPECT_NE(text.find("model: graphed checkpoint " + checkpoint() + " (iteration 4) on cpu, fp32; tokenizer: "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("--- 1 ---\nThe q"), std::string::npos) << text;
  EXPECT_NE(text.find("first token after "), std::string::npos) << text;
  EXPECT_NE(text.find("6 tokens in "), std::string::npos) << text;
  EXPECT_NE(text.find("engine: scope none, 0 steps from graphs, 6 eager"), std::string::npos) << text;
}

TEST(GenerateCommandTest, JsonHasEveryCompletionAndTheTimings) {
  const auto result =
      nlohmann::json::parse(generate({"--load", checkpoint(), "--prompt", "The", "--prompt-ids", "84 104",
                                      "--batch-size", "3", "--max-new-tokens", "5", "--json"}));
  ASSERT_EQ(result["completions"].size(), 3u);
  EXPECT_EQ(result["requests"], 3);
  EXPECT_EQ(result["completions"][0]["prompt_ids"], (std::vector<int64_t>{84, 104, 101}));    // "The" in bytes
  EXPECT_EQ(result["completions"][2]["prompt_ids"], result["completions"][0]["prompt_ids"]);  // prompts repeat
  for (const auto& completion : result["completions"]) EXPECT_EQ(completion["ids"].size(), 5u);
  // Greedy: the same prompt gives the same continuation in any row.
  EXPECT_EQ(result["completions"][0]["ids"], result["completions"][2]["ids"]);
  EXPECT_GT(result["tokens_per_second"].get<double>(), 0.0);
  EXPECT_EQ(result["scope"], "none");
}

TEST(GenerateCommandTest, SpeculationKeepsTheTextAndReportsWhatItProposedAndKept) {
  // A repeated phrase: prompt lookup finds what follows, and the 4-iteration model's greedy text loops.
  const std::vector<std::string> arguments{"--load",           checkpoint(), "--prompt", "fox. fox. fo",
                                           "--max-new-tokens", "18",         "--json"};
  std::vector<std::string> speculative = arguments;
  speculative.insert(speculative.end(), {"--speculative-config",
                                         R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3,
                                             "prompt_lookup_min": 1})"});
  const auto plain = nlohmann::json::parse(generate(arguments));
  const auto result = nlohmann::json::parse(generate(speculative));
  EXPECT_EQ(result["completions"][0]["ids"], plain["completions"][0]["ids"]);
  const auto& figures = result["engine"]["speculative"];
  EXPECT_EQ(figures["method"], "ngram");
  EXPECT_EQ(figures["num_speculative_tokens"], 4);
  EXPECT_GT(figures["draft_tokens"].get<int64_t>(), 0);
  EXPECT_GT(figures["accepted_tokens"].get<int64_t>(), 0);
  EXPECT_GT(figures["mean_accepted_length"].get<double>(), 1.0);
  EXPECT_TRUE(plain["engine"]["speculative"].is_null());
  speculative.pop_back();  // the text output's line
  speculative.erase(std::find(speculative.begin(), speculative.end(), "--json"));
  speculative.push_back(R"({"method": "ngram", "num_speculative_tokens": 2})");
  EXPECT_NE(generate(speculative).find("speculation: ngram, "), std::string::npos);
  EXPECT_NE(generate_error({"--load", checkpoint(), "--prompt", "x", "--speculative-config",
                            R"({"method": "eagle3", "model": "small", "num_speculative_tokens": 4})"})
                .find("--speculative-config: the method 'eagle3' is not built yet"),
            std::string::npos);
}

/// --speculative-config giving `draft` as the draft model, 3 tokens a step.
std::string draft_config(const std::string& draft) {
  return nlohmann::json{{"method", "draft_model"}, {"model", draft}, {"num_speculative_tokens", 3}}.dump();
}

TEST(GenerateCommandTest, ADraftModelKeepsTheTextAndReportsItsSteps) {
  static const std::string other_draft = train_checkpoint("300", "2");  // the same bytes, another model
  const std::vector<std::string> arguments{"--load", checkpoint(),       "--prompt", "The quick", "--prompt",
                                           "a",      "--max-new-tokens", "12",       "--json"};
  const auto plain = nlohmann::json::parse(generate(arguments));
  for (const std::string& draft : {checkpoint(), other_draft}) {
    std::vector<std::string> speculative = arguments;
    speculative.insert(speculative.end(), {"--speculative-config", draft_config(draft)});
    const auto result = nlohmann::json::parse(generate(speculative));
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(result["completions"][i]["ids"], plain["completions"][i]["ids"]) << "draft " << draft;
    }
    const auto& figures = result["engine"]["speculative"];
    EXPECT_EQ(figures["method"], "draft_model");
    EXPECT_EQ(figures["model"], draft);
    EXPECT_EQ(figures["num_speculative_tokens"], 3);
    EXPECT_GT(figures["draft_steps"].get<int64_t>(), 0);
    EXPECT_GT(figures["draft_tokens"].get<int64_t>(), 0);
    if (draft == checkpoint()) {  // the target as its own draft keeps what it proposes (fp32: a near-tie may part)
      EXPECT_GE(figures["accepted_tokens"].get<double>(), 0.9 * figures["draft_tokens"].get<double>());
    }
  }
  std::vector<std::string> text = {"--load",
                                   checkpoint(),
                                   "--prompt",
                                   "The",
                                   "--max-new-tokens",
                                   "6",
                                   "--speculative-config",
                                   draft_config(checkpoint())};
  EXPECT_NE(generate(text).find("speculation: draft_model, "), std::string::npos);
}

TEST(GenerateCommandTest, RefusesADraftModelThatIsMissingOrDoesNotLoad) {
  EXPECT_NE(generate_error(
                {"--load", checkpoint(), "--prompt", "x", "--speculative-config", draft_config("/nonexistent/draft")})
                .find("--speculative-config: the draft model '/nonexistent/draft' does not exist; fix: give a graphed "
                      "checkpoint folder"),
            std::string::npos);
  const std::string empty = make_temporary_directory("graphed-empty-draft");
  const std::string refusal =
      generate_error({"--load", checkpoint(), "--prompt", "x", "--speculative-config", draft_config(empty)});
  EXPECT_NE(refusal.find("--speculative-config: the draft model '" + empty + "' does not load: "), std::string::npos)
      << refusal;
  EXPECT_NE(refusal.find("fix: "), std::string::npos) << refusal;
}

TEST(GenerateCommandTest, MorePromptsThanTheEngineHoldsAreAllServed) {
  const auto result =
      nlohmann::json::parse(generate({"--load", checkpoint(), "--prompt", "The", "--prompt", "A b", "--prompt", "x",
                                      "--inference-max-requests", "2", "--max-new-tokens", "4", "--json"}));
  ASSERT_EQ(result["completions"].size(), 3u);
  for (const auto& completion : result["completions"]) {
    EXPECT_EQ(completion["ids"].size(), 4u);
    EXPECT_EQ(completion["finish_reason"], "length");
  }
  EXPECT_EQ(result["engine"]["max_requests"], 2);
  EXPECT_NE(generate_error({"--load", checkpoint(), "--prompt", "x", "--inference-max-requests", "0"})
                .find("--inference-max-requests is 0; fix: give 1 or more"),
            std::string::npos);
  EXPECT_NE(generate_error({"--load", checkpoint(), "--prompt", "x", "--inference-dynamic-batching-block-size", "0"})
                .find("--inference-dynamic-batching-block-size is 0; fix: give 1 to 4096"),
            std::string::npos);
}

TEST(GenerateCommandTest, TheDefaultTokenCountFitsTheContext) {
  const auto result = nlohmann::json::parse(generate({"--load", checkpoint(), "--prompt", "The q", "--json"}));
  EXPECT_EQ(result["completions"][0]["ids"].size(), 27u);  // a context of 32 less the 5-byte prompt
}

TEST(GenerateCommandTest, StopTokensEndARow) {
  const auto free_run =
      nlohmann::json::parse(generate({"--load", checkpoint(), "--prompt", "The", "--max-new-tokens", "6", "--json"}));
  const int64_t second = free_run["completions"][0]["ids"][1];
  const auto stopped = nlohmann::json::parse(generate({"--load", checkpoint(), "--prompt", "The", "--max-new-tokens",
                                                       "6", "--stop-token", std::to_string(second), "--json"}));
  const auto ids = stopped["completions"][0]["ids"].get<std::vector<int64_t>>();
  EXPECT_TRUE(stopped["completions"][0]["stopped"].get<bool>());
  EXPECT_EQ(ids.back(), second);
  EXPECT_LE(ids.size(), 2u);
}

TEST(GenerateCommandTest, RefusesMistakesWithTheFlagAndTheFix) {
  const std::string& load = checkpoint();
  EXPECT_NE(generate_error({"--prompt", "x"}).find("no model was given; fix: pass --load DIR"), std::string::npos);
  EXPECT_NE(generate_error({"--load", load, "--hf", load, "--prompt", "x"}).find("both --load and --hf were given"),
            std::string::npos);
  EXPECT_NE(generate_error({"--load", load}).find("no prompt was given; fix: pass --prompt TEXT"), std::string::npos);
  EXPECT_NE(generate_error({"--load", load, "--prompt-ids", "1 x"}).find("--prompt-ids '1 x' holds 'x'"),
            std::string::npos);
  EXPECT_EQ(generate_error({"--load", load, "--prompt-ids", "300", "--max-new-tokens", "4"}),
            "the prompt holds token id 300, outside the model's vocabulary of 256 (ids 0 to 255); fix: encode it "
            "with the model's tokenizer");
  EXPECT_NE(generate_error({"--load", load, "--prompt", "x", "--temperature", "-1"}).find("--temperature is -1"),
            std::string::npos);
  EXPECT_NE(generate_error({"--load", load, "--prompt", "x", "--top-p", "0"}).find("--top-p is 0"), std::string::npos);
  EXPECT_NE(generate_error({"--load", load, "--prompt", "x", "--prompt", "y", "--batch-size", "1"})
                .find("--batch-size 1 is smaller than the 2 prompts"),
            std::string::npos);
  EXPECT_NE(generate_error({"--load", load, "--prompt", "x", "--dtype", "int8"}).find("--dtype 'int8'"),
            std::string::npos);
  EXPECT_NE(generate_error({"--load", load, "--prompt", "x", "--inference-cuda-graph-scope", "block"})
                .find("--inference-cuda-graph-scope block needs CUDA graphs, but " +
                      graphed::testing::why_no_graphs_on_cpu()),
            std::string::npos);
  EXPECT_NE(generate_error(
                {"--load", load, "--prompt", "x", "--cuda-graph-impl", "none", "--inference-cuda-graph-scope", "layer"})
                .find("TC-5"),
            std::string::npos);
  EXPECT_NE(generate_error({"--load", "/nonexistent", "--prompt", "x"}).find("/nonexistent"), std::string::npos);
  EXPECT_NE(generate_error({"--load", load, "--prompt-file", "/nonexistent.txt"})
                .find("--prompt-file '/nonexistent.txt' cannot be read"),
            std::string::npos);
  EXPECT_EQ(generate_error({"--load", load, "--prompt", "x", "--num-layers", "2"}),
            "'--num-layers' is not a flag of graphed generate (it is one of graphed train, bench, check-config); fix: "
            "leave it out: generate takes the model and its settings from --load or --hf");
}

/// A prompt the engine would refuse is one error line, before anything is printed or run; its fix fits the
/// context (never "at most 0 tokens") and names the flag.
TEST(GenerateCommandTest, APromptThatCannotRunIsOneErrorLineBeforeAnyOutput) {
  const auto run = [](std::vector<std::string> arguments, std::string& printed) {
    arguments.insert(arguments.begin(), {"generate", "--load", checkpoint(), "--device", "cpu"});
    std::ostringstream out;
    const std::string error = testing::error_text<Error>([&] { run_generate(parse_command_line(arguments), out); });
    printed = out.str();
    return error;
  };
  std::string printed;
  EXPECT_EQ(run({"--prompt", "x", "--prompt", "y y y y y y y y y y y y y y y y", "--max-new-tokens", "20"}, printed),
            "prompt 2 of 2: the prompt has 31 tokens, and with 20 new tokens that is 51 positions, past the context "
            "of 32; fix: ask for at most 1 new token (--max-new-tokens), or shorten the prompt to at most 12 tokens");
  EXPECT_EQ(printed, "");
  EXPECT_EQ(run({"--prompt", "x", "--max-new-tokens", "40"}, printed),
            "the prompt has 1 token, and with 40 new tokens that is 41 positions, past the context of 32; fix: ask "
            "for at most 31 new tokens (--max-new-tokens)");
  EXPECT_EQ(run({"--prompt", std::string(40, 'z'), "--max-new-tokens", "2"}, printed),
            "the prompt has 40 tokens, and the context holds 32 positions, the prompt's and the new tokens'; fix: "
            "shorten the prompt to at most 31 tokens");
  EXPECT_EQ(printed, "");
}

/// tiny's 64 positions, trained with RoPE on sequences of 128: the model's context is the 128 it trained on, so
/// a prompt of 100 tokens runs (it was refused past 64 once, with the training accepted).
TEST(GenerateCommandTest, ARopeModelTrainedPastItsPresetsPositionsServesWhatItTrainedOn) {
  const std::string dir = make_temporary_directory("graphed-generate-rope");
  std::ofstream(dir + "/text.txt") << std::string(3000, 'a') + "The quick brown fox jumps over the lazy dog. ";
  std::ostringstream trained;
  run_train(parse_command_line({"train", "--preset", "tiny", "--position-embedding-type", "rope", "--seq-length", "128",
                                "--data-path", dir + "/text.txt", "--device", "cpu", "--train-iters", "2",
                                "--eval-iters", "0", "--sample-tokens", "0", "--save", dir + "/run"}),
            trained);
  const auto result = nlohmann::json::parse(
      generate({"--load", dir + "/run", "--prompt", std::string(100, 'a'), "--max-new-tokens", "20", "--json"}));
  EXPECT_EQ(result["completions"][0]["ids"].size(), 20u);
}

/// The same model as checkpoint(), with a table of 1024 ids over the 256-byte tokenizer (tiny's
/// --vocab-size; Megatron pads vocabularies the same way), trained 2 iterations: far from learned, so
/// that its padded ids are as likely as the bytes.
const std::string& padded_checkpoint() {
  static const std::string folder = train_checkpoint("1024", "2");
  return folder;
}

TEST(GenerateCommandTest, APaddedVocabularyNeverYieldsAnIdTheTokenizerCannotDecode) {
  // It once printed the prompt, then "error: token id 709 is outside the vocabulary (256 ids: 0..255)".
  for (const char* seed : {"1", "2", "3", "4", "5"}) {
    for (const char* temperature : {"1.0", "1.5"}) {
      const auto result =
          nlohmann::json::parse(generate({"--load", padded_checkpoint(), "--prompt", "The Congress", "--temperature",
                                          temperature, "--seed", seed, "--max-new-tokens", "16", "--json"}));
      for (const auto& id : result["completions"][0]["ids"]) {
        EXPECT_LT(id.get<int64_t>(), 256) << "seed " << seed << ", temperature " << temperature;
      }
    }
  }
  EXPECT_EQ(nlohmann::json::parse(
                generate({"--load", padded_checkpoint(), "--prompt", "The", "--json"}))["completions"][0]["ids"]
                .size(),
            29u)
      << "greedy too";
}

TEST(GenerateCommandTest, ACorruptCheckpointGetsTheWordsTrainGives) {
  const std::string folder = make_temporary_directory("graphed-generate-corrupt") + "/run";
  const std::string source = padded_checkpoint() + "/iter_0000002";
  create_directories(folder);
  for (const std::string name : {"trainer.json", "optimizer.safetensors"}) {
    std::string contents;
    read_file(source + "/" + name, contents);
    std::ofstream(folder + "/" + name) << contents;
  }
  std::ofstream(folder + "/model.safetensors") << "not a safetensors file";
  const std::string from_generate = generate_error({"--load", folder, "--prompt", "x"});
  const std::string from_train = testing::error_text<Error>([&] {
    std::ostringstream out;
    run_train(parse_command_line({"train", "--load", folder, "--device", "cpu", "--train-iters", "3"}), out);
  });
  EXPECT_EQ(from_generate, from_train);
  EXPECT_EQ(from_generate.rfind("checkpoint file '" + folder + "/model.safetensors' is corrupt: ", 0), 0u)
      << from_generate;
  EXPECT_NE(from_generate.find("; fix: pass another checkpoint to --load (an earlier iter_* folder of the same --save "
                               "folder, say)"),
            std::string::npos)
      << from_generate;
}

}  // namespace
}  // namespace graphed::cli
