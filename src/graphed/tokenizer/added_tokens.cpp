// tokenizer/added_tokens.cpp — see tokenizer/added_tokens.h. Follows HF tokenizers' find_matches
// (tokenizer/added_vocabulary.rs): a match that fails single_word is skipped and the search goes on
// after it; lstrip never reaches back into the previous match.
#include "graphed/tokenizer/added_tokens.h"

#include <algorithm>

#include "graphed/tokenizer/unicode_properties.h"
#include "graphed/util/utf8.h"

namespace graphed::tokenizer {
namespace {

/// The last code point of valid UTF-8 text ending at `end` (text[0, end) non-empty).
char32_t code_point_before(std::string_view text, std::size_t end) {
  std::size_t begin = end - 1;
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  const std::u32string decoded = to_code_points(text.substr(begin, end - begin));
  return decoded.empty() ? 0 : decoded.front();
}

char32_t code_point_at(std::string_view text, std::size_t begin) {
  std::size_t end = begin + 1;
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  const std::u32string decoded = to_code_points(text.substr(begin, end - begin));
  return decoded.empty() ? 0 : decoded.front();
}

std::size_t code_point_length_at(std::string_view text, std::size_t begin) {
  std::size_t end = begin + 1;
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  return end - begin;
}

/// Where the whitespace run that ends at `end` begins (never before `floor`).
std::size_t whitespace_start_before(std::string_view text, std::size_t end, std::size_t floor) {
  while (end > floor && is_whitespace(code_point_before(text, end))) {
    std::size_t begin = end - 1;
    while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
    end = begin;
  }
  return std::max(end, floor);
}

/// Where the whitespace run that starts at `begin` ends.
std::size_t whitespace_end_after(std::string_view text, std::size_t begin) {
  while (begin < text.size() && is_whitespace(code_point_at(text, begin))) begin += code_point_length_at(text, begin);
  return begin;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) {
  for (auto& token : tokens) {
    if (!token.content.empty()) tokens_.push_back(std::move(token));
  }
  for (std::size_t index = 0; index < tokens_.size(); ++index) {
    by_first_byte_[static_cast<unsigned char>(tokens_[index].content[0])].push_back(index);
  }
  for (auto& [byte, indices] : by_first_byte_) {
    std::stable_sort(indices.begin(), indices.end(), [this](std::size_t a, std::size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

std::optional<std::size_t> AddedTokenMatcher::longest_match_at(std::string_view text, std::size_t at) const {
  const auto found = by_first_byte_.find(static_cast<unsigned char>(text[at]));
  if (found == by_first_byte_.end()) return std::nullopt;
  for (const std::size_t index : found->second) {
    if (text.compare(at, tokens_[index].content.size(), tokens_[index].content) == 0) return index;
  }
  return std::nullopt;
}

std::vector<TextSegment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<TextSegment> segments;
  std::size_t plain_start = 0;  // where the text not yet given to a segment begins
  std::size_t search = 0;       // where the next match may start
  while (search < text.size()) {
    const auto match = longest_match_at(text, search);
    if (!match) {
      search += code_point_length_at(text, search);
      continue;
    }
    const AddedToken& token = tokens_[*match];
    std::size_t begin = search;
    std::size_t end = search + token.content.size();
    search = end;
    if (token.single_word) {
      const bool word_before = begin > 0 && is_word_character(code_point_before(text, begin));
      const bool word_after = end < text.size() && is_word_character(code_point_at(text, end));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) begin = whitespace_start_before(text, begin, plain_start);
    if (token.rstrip) end = whitespace_end_after(text, end);
    if (plain_start < begin) segments.push_back({text.substr(plain_start, begin - plain_start), std::nullopt});
    segments.push_back({text.substr(begin, end - begin), token.id});
    plain_start = end;
    search = std::max(search, end);
  }
  if (plain_start < text.size() || segments.empty()) {
    segments.push_back({text.substr(plain_start), std::nullopt});
  }
  return segments;
}

}  // namespace graphed::tokenizer
