// tokenizer/unicode_properties.cpp — see tokenizer/unicode_properties.h. Hangul syllables decompose and
// compose by the arithmetic of Unicode §3.12, so the tables leave them out.
#include "graphed/tokenizer/unicode_properties.h"

#include <algorithm>

#include "graphed/tokenizer/unicode_tables.h"

namespace graphed::tokenizer {
namespace {

constexpr char32_t kHangulSyllableBase = 0xAC00;
constexpr char32_t kHangulLeadingBase = 0x1100;
constexpr char32_t kHangulVowelBase = 0x1161;
constexpr char32_t kHangulTrailingBase = 0x11A7;
constexpr char32_t kHangulLeadingCount = 19;
constexpr char32_t kHangulVowelCount = 21;
constexpr char32_t kHangulTrailingCount = 28;
constexpr char32_t kHangulVowelTrailingCount = kHangulVowelCount * kHangulTrailingCount;    // 588
constexpr char32_t kHangulSyllableCount = kHangulLeadingCount * kHangulVowelTrailingCount;  // 11172

bool in_ranges(const tables::CodePointRange* ranges, std::size_t count, char32_t code_point) {
  const tables::CodePointRange* end = ranges + count;
  const auto* found = std::upper_bound(
      ranges, end, code_point, [](char32_t value, const tables::CodePointRange& range) { return value < range.first; });
  if (found == ranges) return false;
  return code_point <= (found - 1)->last;
}

bool is_hangul_syllable(char32_t code_point) {
  return code_point >= kHangulSyllableBase && code_point < kHangulSyllableBase + kHangulSyllableCount;
}

}  // namespace

bool is_letter(char32_t code_point) {
  if (code_point < 0x80) return (code_point | 0x20) >= 'a' && (code_point | 0x20) <= 'z';
  return in_ranges(tables::kLetterRanges, tables::kLetterRangesCount, code_point);
}

bool is_number(char32_t code_point) {
  if (code_point < 0x80) return code_point >= '0' && code_point <= '9';
  return in_ranges(tables::kNumberRanges, tables::kNumberRangesCount, code_point);
}

bool is_whitespace(char32_t code_point) {
  if (code_point < 0x80) return code_point == ' ' || (code_point >= 0x09 && code_point <= 0x0D);
  return in_ranges(tables::kWhitespaceRanges, tables::kWhitespaceRangesCount, code_point);
}

bool is_word_character(char32_t code_point) {
  return in_ranges(tables::kWordRanges, tables::kWordRangesCount, code_point);
}

std::uint8_t combining_class(char32_t code_point) {
  if (code_point < 0x300) return 0;
  const auto* begin = tables::kCombiningClassRanges;
  const auto* end = begin + tables::kCombiningClassRangesCount;
  const auto* found =
      std::upper_bound(begin, end, code_point,
                       [](char32_t value, const tables::CombiningClassRange& range) { return value < range.first; });
  if (found == begin || code_point > (found - 1)->last) return 0;
  return (found - 1)->combining_class;
}

std::u32string canonical_decomposition(char32_t code_point) {
  if (is_hangul_syllable(code_point)) {
    const char32_t index = code_point - kHangulSyllableBase;
    std::u32string parts;
    parts += static_cast<char32_t>(kHangulLeadingBase + index / kHangulVowelTrailingCount);
    parts += static_cast<char32_t>(kHangulVowelBase + (index % kHangulVowelTrailingCount) / kHangulTrailingCount);
    if (index % kHangulTrailingCount != 0)
      parts += static_cast<char32_t>(kHangulTrailingBase + index % kHangulTrailingCount);
    return parts;
  }
  if (code_point < 0xC0) return {};
  const auto* begin = tables::kDecompositions;
  const auto* end = begin + tables::kDecompositionsCount;
  const auto* found = std::lower_bound(begin, end, code_point, [](const tables::Decomposition& entry, char32_t value) {
    return entry.code_point < value;
  });
  if (found == end || found->code_point != code_point) return {};
  return std::u32string(tables::kDecompositionParts + found->offset, found->length);
}

std::optional<char32_t> compose_pair(char32_t first, char32_t second) {
  // Hangul: leading consonant + vowel -> LV syllable; LV syllable + trailing consonant -> LVT.
  if (first >= kHangulLeadingBase && first < kHangulLeadingBase + kHangulLeadingCount && second >= kHangulVowelBase &&
      second < kHangulVowelBase + kHangulVowelCount) {
    return kHangulSyllableBase +
           ((first - kHangulLeadingBase) * kHangulVowelCount + (second - kHangulVowelBase)) * kHangulTrailingCount;
  }
  if (is_hangul_syllable(first) && (first - kHangulSyllableBase) % kHangulTrailingCount == 0 &&
      second > kHangulTrailingBase && second < kHangulTrailingBase + kHangulTrailingCount) {
    return first + (second - kHangulTrailingBase);
  }
  const auto* begin = tables::kCompositions;
  const auto* end = begin + tables::kCompositionsCount;
  const auto* found =
      std::lower_bound(begin, end, std::make_pair(first, second),
                       [](const tables::Composition& entry, const std::pair<char32_t, char32_t>& pair) {
                         return entry.first < pair.first || (entry.first == pair.first && entry.second < pair.second);
                       });
  if (found == end || found->first != first || found->second != second) return std::nullopt;
  return found->composite;
}

std::string unicode_version() { return tables::kUnicodeVersion; }

}  // namespace graphed::tokenizer
