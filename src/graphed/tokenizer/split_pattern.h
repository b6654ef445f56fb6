// tokenizer/split_pattern.h — the three pre-tokenizer regexes graphed knows, each as a hand-written
// matcher (no regex engine): GPT-2's (also what a ByteLevel pre-tokenizer with use_regex=true
// applies), Llama-3's and Qwen2's (Llama-3's with single digits). A matcher takes, at each position,
// the match the regex's leftmost-first alternation would take there, so splitting gives the same
// pieces as HF tokenizers' Split(pattern, behavior=Isolated). tokenizer.json patterns are recognised
// by their exact text; any other pattern is refused.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace graphed::tokenizer {

enum class SplitPattern {
  kGpt2,    ///< 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,  ///< (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,   ///< as kLlama3 with \p{N} (one digit) for \p{N}{1,3}
};

/// "gpt2", "llama3", "qwen2".
std::string to_string(SplitPattern pattern);

/// The regex text as tokenizer.json spells it (after JSON unescaping).
const std::string& pattern_regex(SplitPattern pattern);

/// The pattern whose regex text is exactly `regex`, or nullopt.
std::optional<SplitPattern> find_split_pattern(const std::string& regex);

/// "gpt2: <regex>; llama3: <regex>; qwen2: <regex>", for error messages.
std::string supported_split_patterns();

/// The pieces of valid UTF-8 text, in order; together they cover the whole text. Empty text gives
/// no pieces.
std::vector<std::string_view> split_with_pattern(std::string_view text, SplitPattern pattern);

}  // namespace graphed::tokenizer
