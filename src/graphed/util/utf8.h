// util/utf8.h — UTF-8 for the tokenizers and for text shown to users: strict decoding of input text into code points
// (an invalid byte is a DataError giving its offset), lossy decoding of model output (each maximal invalid subsequence
// becomes U+FFFD, as Rust's String::from_utf8_lossy and the WHATWG decoder do), and encoding a code point. No locale,
// no ICU.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace graphed {

/// The replacement character U+FFFD in UTF-8.
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

/// Text decoded into code points, each with the byte offset where it starts; byte_offsets has one
/// more entry than code_points (the text's size), so code point i spans
/// [byte_offsets[i], byte_offsets[i + 1]).
struct CodePoints {
  std::vector<char32_t> code_points;
  std::vector<std::size_t> byte_offsets;
  std::size_t size() const { return code_points.size(); }
};

/// Decodes valid UTF-8. Throws DataError "<what> is not valid UTF-8: byte 0xC3 at offset 12 ...".
/// `what` names the input in that message ("the text", "tokenizer.json token 'abc'").
CodePoints decode_utf8(std::string_view text, const std::string& what);

/// The byte offset of the first invalid UTF-8 sequence, or text.size() when the text is valid.
std::size_t find_invalid_utf8(std::string_view text);

/// Throws the DataError of decode_utf8 when the text is not valid UTF-8.
void check_utf8(std::string_view text, const std::string& what);

/// Valid UTF-8: valid sequences are copied, every maximal invalid subsequence becomes one U+FFFD.
std::string to_valid_utf8_lossy(std::string_view bytes);

/// Appends the UTF-8 encoding of a code point (U+FFFD for a surrogate or a value past U+10FFFF).
void append_utf8(std::string& out, char32_t code_point);

/// The UTF-8 encoding of one code point.
std::string utf8_of(char32_t code_point);

/// The code points of UTF-8 text (an invalid sequence becomes U+FFFD, as in to_valid_utf8_lossy).
std::u32string to_code_points(std::string_view valid_utf8);

/// UTF-8 of a sequence of code points.
std::string to_utf8(const std::u32string& code_points);

}  // namespace graphed
