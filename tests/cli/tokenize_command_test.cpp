// tests/cli/tokenize_command_test.cpp — `graphed tokenize`: its command line (required flags, one
// input, --help), the output formats, --decode input parsing, and the one-line errors.
#include "graphed/cli/tokenize_command.h"

#include <sstream>

#include <gtest/gtest.h>

#include "error_text.h"
#include "graphed/util/file_system.h"

namespace graphed::cli {
namespace {

using testing::error_text;

const std::string kUsageFix =
    "fix: graphed tokenize --tokenizer PATH (--text TEXT | --file FILE) [--decode] [--no-special-tokens] [--json] "
    "(see graphed tokenize --help)";

std::vector<std::string> problems_of(const std::vector<std::string>& arguments) {
  try {
    parse_command_line(arguments);
  } catch (const ConfigError& error) {
    return error.details().empty() ? std::vector<std::string>{error.what()} : error.details();
  }
  return {"(no error)"};
}

std::string run(const std::vector<std::string>& arguments) {
  std::ostringstream out;
  EXPECT_EQ(run_tokenize(parse_command_line(arguments), out), 0);
  return out.str();
}

TEST(TokenizeCommandTest, FlagsAreParsed) {
  const CommandLine line =
      parse_command_line({"tokenize", "--tokenizer", "bytes", "--text", "hi there", "--json", "--no-special-tokens"});
  EXPECT_EQ(line.command, "tokenize");
  EXPECT_EQ(line.tokenizer_path, "bytes");
  EXPECT_EQ(line.input_text, std::optional<std::string>("hi there"));
  EXPECT_EQ(line.input_file, std::nullopt);
  EXPECT_TRUE(line.json_output);
  EXPECT_FALSE(line.add_special_tokens);
  EXPECT_FALSE(line.decode_ids);
  const CommandLine help = parse_command_line({"tokenize", "--help"});
  ASSERT_TRUE(help.early_output.has_value());
  EXPECT_NE(help.early_output->find("--no-special-tokens"), std::string::npos);
}

TEST(TokenizeCommandTest, MissingOrConflictingFlagsAreOneLineErrors) {
  EXPECT_EQ(problems_of({"tokenize", "--text", "x"}),
            (std::vector<std::string>{"graphed tokenize needs --tokenizer PATH; " + kUsageFix}));
  EXPECT_EQ(problems_of({"tokenize", "--tokenizer", "bytes", "--text", "x", "--file", "y"}),
            (std::vector<std::string>{"graphed tokenize needs exactly one of --text and --file; " + kUsageFix}));
  EXPECT_EQ(problems_of({"tokenize", "--tokenizer", "bytes", "--text", "x", "--bogus"}),
            (std::vector<std::string>{"unknown argument '--bogus' for graphed tokenize; " + kUsageFix}));
}

TEST(TokenizeCommandTest, PrintsIdsJsonAndDecodedText) {
  EXPECT_EQ(run({"tokenize", "--tokenizer", "bytes", "--text", "hi"}), "104 105\n");
  EXPECT_EQ(run({"tokenize", "--tokenizer", "bytes", "--text", "hi", "--json"}),
            R"json({"ids":[104,105],"tokenizer":"byte tokenizer (id = byte value, 256 ids)","tokens":["h","i"]})json"
            "\n");
  EXPECT_EQ(run({"tokenize", "--tokenizer", "bytes", "--decode", "--text", "[104, 105,\n33]"}), "hi!\n");
  EXPECT_EQ(run({"tokenize", "--tokenizer", "bytes", "--decode", "--text", "104 10", "--json"}), R"({"text":"h\n"})"
                                                                                                 "\n");
  EXPECT_EQ(run({"tokenize", "--tokenizer", "bytes", "--text", ""}), "\n");
}

TEST(TokenizeCommandTest, BadInputsNameTheProblem) {
  EXPECT_EQ(
      error_text<DataError>([] {
        run({"tokenize", "--tokenizer", "bytes", "--decode", "--text", "12 x3 4"});
      }),
      "--text: item 2 'x3' is not a token id; fix: with --decode, pass integer ids separated by spaces or commas");
  EXPECT_EQ(error_text<DataError>([] {
              run({"tokenize", "--tokenizer", "bytes", "--decode", "--text", "104 999"});
            }),
            "token id 999 is outside the vocabulary (256 ids: 0..255); fix: pass ids this tokenizer produced");
  EXPECT_EQ(error_text<DataError>([] {
              run({"tokenize", "--tokenizer", "bytes", "--file", "/no/such/input.txt"});
            }),
            "cannot read --file '/no/such/input.txt': no such file or directory; fix: check the path (or pass the text "
            "with --text)");
  EXPECT_EQ(
      error_text<DataError>([] {
        run({"tokenize", "--tokenizer", std::string(GRAPHED_SOURCE_DIR) + "/tests/tokenizer/data", "--text", "a\xFF"});
      }),
      "tokenizer folder '" + std::string(GRAPHED_SOURCE_DIR) +
          "/tests/tokenizer/data' holds no tokenizer.json, vocab.json + merges.txt, or "
          "encoder.json + vocab.bpe; fix: pass a tokenizer.json file; a folder holding tokenizer.json, vocab.json + "
          "merges.txt, or "
          "encoder.json + vocab.bpe; or the word bytes (graphed's byte tokenizer)");
  EXPECT_EQ(error_text<DataError>([] {
              run({"tokenize", "--tokenizer", "/no/such/dir", "--text", "x"});
            }),
            "tokenizer '/no/such/dir' does not exist; fix: pass a tokenizer.json file; a folder holding "
            "tokenizer.json, vocab.json + "
            "merges.txt, or encoder.json + vocab.bpe; or the word bytes (graphed's byte tokenizer)");
}

TEST(TokenizeCommandTest, ReadsTheInputFile) {
  const std::string folder = make_temporary_directory("graphed-tokenize-test");
  const std::string file = join_path(folder, "ids.txt");
  ASSERT_EQ(write_file_atomically(file, "72,105\n"), 0);
  EXPECT_EQ(run({"tokenize", "--tokenizer", "bytes", "--decode", "--file", file}), "Hi\n");
  EXPECT_EQ(run({"tokenize", "--tokenizer", "bytes", "--file", file}), "55 50 44 49 48 53 10\n");
  const std::string latin1 = join_path(folder, "latin1.txt");
  ASSERT_EQ(write_file_atomically(latin1, "caf\xE9"), 0);
  EXPECT_EQ(run({"tokenize", "--tokenizer", "bytes", "--file", latin1}), "99 97 102 233\n");  // bytes takes any bytes
  const std::string tokenizer = join_path(folder, "tokenizer.json");
  ASSERT_EQ(write_file_atomically(tokenizer, R"({"model": {"type": "BPE", "vocab": {"c": 0}, "merges": []}})"), 0);
  EXPECT_EQ(error_text<DataError>([&] {
              run({"tokenize", "--tokenizer", tokenizer, "--file", latin1});
            }),
            "--file '" + latin1 +
                "' is not valid UTF-8: byte 0xE9 at byte offset 3; fix: convert the input to UTF-8 (e.g. iconv -f "
                "latin1 -t utf-8)");
  remove_all(folder);
}

}  // namespace
}  // namespace graphed::cli
