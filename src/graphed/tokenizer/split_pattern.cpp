// tokenizer/split_pattern.cpp — see tokenizer/split_pattern.h. Each matcher tries the regex's alternatives
// in order at one position and returns where the first that matches ends; comments quote the
// alternative. Case-insensitive contractions follow Unicode simple case folding, under which 's'
// also matches U+017F (long s), as in Oniguruma and Rust's regex crate.
#include "graphed/tokenizer/split_pattern.h"

#include "graphed/tokenizer/unicode_properties.h"
#include "graphed/util/error.h"
#include "graphed/util/utf8.h"

namespace graphed::tokenizer {
namespace {

using Text = std::vector<char32_t>;

bool is_other(char32_t c) { return !is_whitespace(c) && !is_letter(c) && !is_number(c); }
bool is_line_break(char32_t c) { return c == '\r' || c == '\n'; }

/// The end of the run of code points satisfying the predicate from `from`.
template <typename Predicate>
std::size_t run_end(const Text& text, std::size_t from, Predicate predicate) {
  while (from < text.size() && predicate(text[from])) ++from;
  return from;
}

bool matches_letter(char32_t c, char lower, bool ignore_case) {
  if (c == static_cast<char32_t>(lower)) return true;
  if (!ignore_case) return false;
  return c == static_cast<char32_t>(lower - 'a' + 'A') || (lower == 's' && c == 0x17F);
}

/// 's|'t|'re|'ve|'m|'ll|'d (case-insensitive for Llama-3 and Qwen2): the end, or 0 for no match.
std::size_t match_contraction(const Text& text, std::size_t at, bool ignore_case) {
  if (text[at] != '\'') return 0;
  static const char* const kSuffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  for (const char* suffix : kSuffixes) {
    std::size_t end = at + 1;
    for (const char* letter = suffix; *letter != '\0'; ++letter, ++end) {
      if (end >= text.size() || !matches_letter(text[end], *letter, ignore_case)) {
        end = 0;
        break;
      }
    }
    if (end != 0) return end;
  }
  return 0;
}

/// \s+(?!\S)|\s+ at a whitespace code point: the whole run at the end of the text or before
/// whitespace; a run followed by a non-space leaves its last code point to the next piece.
std::size_t match_whitespace_run(const Text& text, std::size_t at) {
  const std::size_t end = run_end(text, at, is_whitespace);
  if (end == text.size() || end - at == 1) return end;
  return end - 1;
}

std::size_t match_gpt2(const Text& text, std::size_t at) {
  if (const std::size_t end = match_contraction(text, at, false)) return end;
  const bool space = text[at] == ' ' && at + 1 < text.size();
  for (bool (*in_class)(char32_t) : {is_letter, is_number, is_other}) {
    // ` ?\p{L}+`, then ` ?\p{N}+`, then ` ?[^\s\p{L}\p{N}]+`
    if (space && in_class(text[at + 1])) return run_end(text, at + 1, in_class);
    if (in_class(text[at])) return run_end(text, at, in_class);
  }
  return match_whitespace_run(text, at);
}

std::size_t match_llama3(const Text& text, std::size_t at, std::size_t max_digits) {
  const std::size_t size = text.size();
  const char32_t c = text[at];
  if (const std::size_t end = match_contraction(text, at, true)) return end;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (!is_line_break(c) && !is_letter(c) && !is_number(c) && at + 1 < size && is_letter(text[at + 1])) {
    return run_end(text, at + 1, is_letter);
  }
  if (is_letter(c)) return run_end(text, at, is_letter);
  // \p{N}{1,3} (Llama-3) or \p{N} (Qwen2)
  if (is_number(c)) {
    std::size_t end = at;
    while (end < size && end - at < max_digits && is_number(text[end])) ++end;
    return end;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  if (c == ' ' && at + 1 < size && is_other(text[at + 1])) {
    return run_end(text, run_end(text, at + 1, is_other), is_line_break);
  }
  if (is_other(c)) return run_end(text, run_end(text, at, is_other), is_line_break);
  // \s*[\r\n]+: the whitespace run up to and including its last line break
  const std::size_t end = run_end(text, at, is_whitespace);
  for (std::size_t last = end; last > at; --last) {
    if (is_line_break(text[last - 1])) return last;
  }
  return match_whitespace_run(text, at);
}

struct PatternInfo {
  SplitPattern pattern;
  const char* name;
  std::string regex;
};

const std::vector<PatternInfo>& pattern_infos() {
  static const std::vector<PatternInfo> infos{
      {SplitPattern::kGpt2, "gpt2", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"},
      {SplitPattern::kLlama3, "llama3",
       R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
      {SplitPattern::kQwen2, "qwen2",
       R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
  };
  return infos;
}

const PatternInfo& info_of(SplitPattern pattern) {
  for (const auto& info : pattern_infos()) {
    if (info.pattern == pattern) return info;
  }
  GRAPHED_INTERNAL_ASSERT(false, "unknown SplitPattern");
  return pattern_infos().front();  // not reached
}

}  // namespace

std::string to_string(SplitPattern pattern) { return info_of(pattern).name; }

const std::string& pattern_regex(SplitPattern pattern) { return info_of(pattern).regex; }

std::optional<SplitPattern> find_split_pattern(const std::string& regex) {
  for (const auto& info : pattern_infos()) {
    if (info.regex == regex) return info.pattern;
  }
  return std::nullopt;
}

std::string supported_split_patterns() {
  std::string text;
  for (const auto& info : pattern_infos()) {
    if (!text.empty()) text += "; ";
    text += std::string(info.name) + ": " + info.regex;
  }
  return text;
}

std::vector<std::string_view> split_with_pattern(std::string_view text, SplitPattern pattern) {
  const CodePoints decoded = decode_utf8(text, "the text");
  const Text& code_points = decoded.code_points;
  std::vector<std::string_view> pieces;
  std::size_t at = 0;
  while (at < code_points.size()) {
    std::size_t end = 0;
    switch (pattern) {
      case SplitPattern::kGpt2: end = match_gpt2(code_points, at); break;
      case SplitPattern::kLlama3: end = match_llama3(code_points, at, 3); break;
      case SplitPattern::kQwen2: end = match_llama3(code_points, at, 1); break;
    }
    GRAPHED_INTERNAL_ASSERT(end > at, "a split pattern matched nothing at code point ", at);
    const std::size_t begin_byte = decoded.byte_offsets[at];
    pieces.push_back(text.substr(begin_byte, decoded.byte_offsets[end] - begin_byte));
    at = end;
  }
  return pieces;
}

}  // namespace graphed::tokenizer
