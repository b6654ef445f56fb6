// util/utf8.cpp — see util/utf8.h. The validity rules are Unicode's Table 3-7 (well-formed UTF-8
// byte sequences): no overlong forms, no surrogates, nothing past U+10FFFF.
#include "graphed/util/utf8.h"

#include <cstdio>

#include "graphed/util/error.h"

namespace graphed {
namespace {

/// One step of decoding: the code point, the bytes a valid sequence takes (0 when invalid), and,
/// when invalid, the bytes of the maximal subpart to replace with one U+FFFD (at least 1).
struct Utf8Step {
  char32_t code_point = 0;
  std::size_t valid_length = 0;
  std::size_t invalid_length = 1;
};

/// The allowed range of the second byte for a lead byte (Table 3-7); the later bytes are 80..BF.
bool second_byte_allowed(unsigned char lead, unsigned char second) {
  if (lead == 0xE0) return second >= 0xA0 && second <= 0xBF;
  if (lead == 0xED) return second >= 0x80 && second <= 0x9F;
  if (lead == 0xF0) return second >= 0x90 && second <= 0xBF;
  if (lead == 0xF4) return second >= 0x80 && second <= 0x8F;
  return second >= 0x80 && second <= 0xBF;
}

Utf8Step decode_step(std::string_view text, std::size_t at) {
  Utf8Step step;
  const auto lead = static_cast<unsigned char>(text[at]);
  if (lead < 0x80) {
    step.code_point = lead;
    step.valid_length = 1;
    return step;
  }
  std::size_t length = 0;
  char32_t value = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    value = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    value = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    value = lead & 0x07;
  } else {
    return step;  // a continuation byte, C0, C1 or F5..FF: invalid on its own
  }
  for (std::size_t index = 1; index < length; ++index) {
    if (at + index >= text.size()) {
      step.invalid_length = index;
      return step;
    }
    const auto next = static_cast<unsigned char>(text[at + index]);
    const bool allowed = index == 1 ? second_byte_allowed(lead, next) : (next >= 0x80 && next <= 0xBF);
    if (!allowed) {
      step.invalid_length = index;
      return step;
    }
    value = (value << 6) | (next & 0x3F);
  }
  step.code_point = value;
  step.valid_length = length;
  return step;
}

std::string hex_byte(unsigned char byte) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "0x%02X", byte);
  return buffer;
}

[[noreturn]] void throw_invalid_utf8(std::string_view text, std::size_t at, const std::string& what) {
  throw DataError(what + " is not valid UTF-8: byte " + hex_byte(static_cast<unsigned char>(text[at])) +
                  " at byte offset " + std::to_string(at) +
                  "; fix: convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
}

}  // namespace

void check_utf8(std::string_view text, const std::string& what) {
  const std::size_t at = find_invalid_utf8(text);
  if (at != text.size()) throw_invalid_utf8(text, at, what);
}

std::size_t find_invalid_utf8(std::string_view text) {
  std::size_t at = 0;
  while (at < text.size()) {
    const Utf8Step step = decode_step(text, at);
    if (step.valid_length == 0) return at;
    at += step.valid_length;
  }
  return text.size();
}

CodePoints decode_utf8(std::string_view text, const std::string& what) {
  CodePoints result;
  result.code_points.reserve(text.size());
  result.byte_offsets.reserve(text.size() + 1);
  std::size_t at = 0;
  while (at < text.size()) {
    const Utf8Step step = decode_step(text, at);
    if (step.valid_length == 0) throw_invalid_utf8(text, at, what);
    result.code_points.push_back(step.code_point);
    result.byte_offsets.push_back(at);
    at += step.valid_length;
  }
  result.byte_offsets.push_back(text.size());
  return result;
}

std::string to_valid_utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t at = 0;
  while (at < bytes.size()) {
    const Utf8Step step = decode_step(bytes, at);
    if (step.valid_length == 0) {
      out += kReplacementCharacter;
      at += step.invalid_length;
    } else {
      out.append(bytes.substr(at, step.valid_length));
      at += step.valid_length;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t code_point) {
  if ((code_point >= 0xD800 && code_point <= 0xDFFF) || code_point > 0x10FFFF) code_point = 0xFFFD;
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

std::string utf8_of(char32_t code_point) {
  std::string out;
  append_utf8(out, code_point);
  return out;
}

std::u32string to_code_points(std::string_view text) {
  std::u32string result;
  result.reserve(text.size());
  std::size_t at = 0;
  while (at < text.size()) {
    const Utf8Step step = decode_step(text, at);
    if (step.valid_length == 0) {
      result.push_back(0xFFFD);
      at += step.invalid_length;
    } else {
      result.push_back(step.code_point);
      at += step.valid_length;
    }
  }
  return result;
}

std::string to_utf8(const std::u32string& code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (const char32_t code_point : code_points) append_utf8(out, code_point);
  return out;
}

}  // namespace graphed
