// cli/tokenize_command.h — `graphed tokenize --tokenizer PATH (--text T | --file F) [--decode]
// [--no-special-tokens] [--json]`: prints the ids of a text (space-separated, or as JSON with each
// token's vocabulary entry), or with --decode reads ids and prints their text. The tokenizers are in
// infer/ (load_tokenizer); this parses the flags, reads the input and formats the output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "graphed/cli/command_line.h"

namespace graphed::cli {

/// Parses `tokenize ...` (arguments start with "tokenize"). Throws ConfigError for an unknown flag,
/// a missing --tokenizer, or not exactly one of --text and --file; --help gives early_output.
CommandLine parse_tokenize_command(const std::vector<std::string>& arguments);

/// The ids in a --decode input: integers separated by spaces, commas or newlines, optionally inside
/// [ ]. Throws DataError naming the first item that is not an integer and its position.
std::vector<int64_t> parse_token_ids(const std::string& text, const std::string& source);

/// Runs the command; returns the exit code (0). Throws DataError for a missing or unreadable input
/// file, bad ids, or a tokenizer that cannot be loaded.
///   encode: "15496 995\n", or with --json {"ids":[...],"tokens":["Hello","Ġworld"],"tokenizer":"..."}
///   decode: the text and a newline, or with --json {"text":"..."}
/// --no-special-tokens: encode without the post-processor's template (no BOS); decode leaves out
/// special tokens.
int run_tokenize(const CommandLine& command_line, std::ostream& out);

}  // namespace graphed::cli
