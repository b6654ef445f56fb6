// tokenizer/unicode_properties.h — the character classes the pre-tokenizers match (\p{L}, \p{N}, \s, and
// word characters for single_word added tokens) and the per-code-point data NFC needs, looked up by
// binary search in the generated tables (tokenizer/unicode_tables.cpp, Unicode version in
// unicode_version()). No locale, no ICU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace graphed::tokenizer {

/// General category L (Lu, Ll, Lt, Lm, Lo): what \p{L} matches.
bool is_letter(char32_t code_point);
/// General category N (Nd, Nl, No): what \p{N} matches.
bool is_number(char32_t code_point);
/// The White_Space property: what \s matches in Oniguruma and in Rust's regex crate.
bool is_whitespace(char32_t code_point);
/// L, M, N or Pc: an approximation of Rust regex's \w, used by single_word added tokens.
bool is_word_character(char32_t code_point);

/// Canonical combining class (0 for starters).
std::uint8_t combining_class(char32_t code_point);

/// The full canonical decomposition of a code point (Hangul syllables included, by the algorithm),
/// or an empty string when it has none.
std::u32string canonical_decomposition(char32_t code_point);

/// The primary composite of a pair (Hangul LV and LVT included), if the pair composes.
std::optional<char32_t> compose_pair(char32_t first, char32_t second);

/// The Unicode version of the generated tables ("14.0.0").
std::string unicode_version();

}  // namespace graphed::tokenizer
