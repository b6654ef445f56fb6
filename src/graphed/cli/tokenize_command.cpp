// cli/tokenize_command.cpp — see cli/tokenize_command.h.
#include "graphed/cli/tokenize_command.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "graphed/tokenizer/tokenizer.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/utf8.h"

namespace graphed::cli {
namespace {

const char* const kUsageFix =
    "fix: graphed tokenize --tokenizer PATH (--text TEXT | --file FILE) [--decode] [--no-special-tokens] [--json] "
    "(see graphed tokenize --help)";

std::string read_input(const CommandLine& command_line) {
  if (command_line.input_text) return *command_line.input_text;
  const std::string& path = *command_line.input_file;
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::string contents;
  if (const int error = read_file(path, contents)) {
    std::string reason = std::strerror(error);
    reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
    throw DataError("cannot read --file '" + path + "': " + reason +
                    "; fix: check the path (or pass the text with --text)");
  }
  return contents;
}

/// "--text" or "--file 'PATH'", for messages.
std::string input_name(const CommandLine& command_line) {
  return command_line.input_text ? "--text" : "--file '" + *command_line.input_file + "'";
}

std::string ids_line(const std::vector<int64_t>& ids) {
  std::string line;
  for (std::size_t index = 0; index < ids.size(); ++index) {
    if (index > 0) line += ' ';
    line += std::to_string(ids[index]);
  }
  return line;
}

}  // namespace

CommandLine parse_tokenize_command(const std::vector<std::string>& arguments) {
  CommandLine result;
  result.command = "tokenize";
  CLI::App app{
      "graphed tokenize: encode text into token ids, or decode ids into text.\nThe tokenizer is a tokenizer.json "
      "file, a folder holding tokenizer.json, vocab.json + merges.txt or encoder.json + vocab.bpe, or the word bytes "
      "(graphed's byte tokenizer). See docs/tokenizers.md.",
      "graphed tokenize"};
  app.allow_extras();
  std::string text;
  std::string file;
  bool no_special_tokens = false;
  app.add_option("--tokenizer", result.tokenizer_path, "tokenizer.json, a tokenizer folder, or bytes");
  CLI::Option* text_option = app.add_option("--text", text, "the text to encode (with --decode: the ids)");
  CLI::Option* file_option =
      app.add_option("--file", file, "a file holding the text (with --decode: the ids); - reads standard input");
  app.add_flag("--decode", result.decode_ids, "the input holds ids (separated by spaces or commas); print their text");
  app.add_flag("--no-special-tokens", no_special_tokens,
               "encode without the template's special tokens (no BOS); with --decode, leave special tokens out");
  app.add_flag("--json", result.json_output, "print JSON: ids and token entries, or the decoded text");
  if (!parse_own_flags(app, arguments, result, kUsageFix)) return result;
  std::vector<std::string> problems;
  for (const auto& extra : app.remaining())
    problems.push_back("unknown argument '" + extra + "' for graphed tokenize; " + kUsageFix);
  if (result.tokenizer_path.empty())
    problems.push_back(std::string("graphed tokenize needs --tokenizer PATH; ") + kUsageFix);
  if (text_option->count() + file_option->count() != 1) {
    problems.push_back(std::string("graphed tokenize needs exactly one of --text and --file; ") + kUsageFix);
  }
  if (!problems.empty()) fail_with(problems);
  if (text_option->count() > 0) result.input_text = text;
  if (file_option->count() > 0) result.input_file = file;
  result.add_special_tokens = !no_special_tokens;
  return result;
}

std::vector<int64_t> parse_token_ids(const std::string& text, const std::string& source) {
  std::vector<int64_t> ids;
  std::size_t at = 0;
  std::size_t item = 0;
  auto is_separator = [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) || c == ',' || c == '[' || c == ']';
  };
  while (at < text.size()) {
    if (is_separator(text[at])) {
      ++at;
      continue;
    }
    std::size_t end = at;
    while (end < text.size() && !is_separator(text[end])) ++end;
    const std::string word = text.substr(at, end - at);
    ++item;
    errno = 0;
    char* parsed_end = nullptr;
    const long long value = std::strtoll(word.c_str(), &parsed_end, 10);
    if (parsed_end != word.c_str() + word.size() || errno == ERANGE) {
      throw DataError(source + ": item " + std::to_string(item) + " '" + word.substr(0, 40) +
                      "' is not a token id; fix: with --decode, pass integer ids separated by spaces or commas");
    }
    ids.push_back(value);
    at = end;
  }
  return ids;
}

int run_tokenize(const CommandLine& command_line, std::ostream& out) {
  const std::unique_ptr<tokenizer::Tokenizer> tokenizer = tokenizer::load_tokenizer(command_line.tokenizer_path);
  const std::string input = read_input(command_line);
  using nlohmann::json;
  if (command_line.decode_ids) {
    const std::string text =
        tokenizer->decode(parse_token_ids(input, input_name(command_line)), !command_line.add_special_tokens);
    if (command_line.json_output) {
      out << json{{"text", text}}.dump() << '\n';
    } else {
      out << text << '\n';
    }
    return 0;
  }
  // The tokenizers refuse invalid UTF-8 themselves; checking here lets the message name the input.
  if (command_line.tokenizer_path != "bytes") check_utf8(input, input_name(command_line));
  const std::vector<int64_t> ids = tokenizer->encode(input, command_line.add_special_tokens);
  if (!command_line.json_output) {
    out << ids_line(ids) << '\n';
    return 0;
  }
  json tokens = json::array();
  for (const int64_t id : ids) tokens.push_back(tokenizer->token_text(id));
  json document{{"ids", ids}, {"tokens", tokens}, {"tokenizer", tokenizer->description()}};
  out << document.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  return 0;
}

}  // namespace graphed::cli
