// tokenizer/byte_level.cpp — see tokenizer/byte_level.h.
#include "graphed/tokenizer/byte_level.h"

#include <array>

#include "graphed/util/utf8.h"

namespace graphed::tokenizer {
namespace {

bool is_printable_latin1(unsigned byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

constexpr char32_t kMappedEnd = 256 + 68;  // the 68 unprintable bytes take U+0100..U+0143

struct ByteMaps {
  std::array<char32_t, 256> to_unicode{};
  std::array<std::string, 256> to_unicode_utf8;
  std::array<int, kMappedEnd> to_byte{};  // -1: not a mapped code point
};

const ByteMaps& byte_maps() {
  static const ByteMaps maps = [] {
    ByteMaps result;
    char32_t next = 256;
    result.to_byte.fill(-1);
    for (unsigned byte = 0; byte < 256; ++byte) {
      result.to_unicode[byte] = is_printable_latin1(byte) ? static_cast<char32_t>(byte) : next++;
      result.to_unicode_utf8[byte] = utf8_of(result.to_unicode[byte]);
      result.to_byte[result.to_unicode[byte]] = static_cast<int>(byte);
    }
    return result;
  }();
  return maps;
}

}  // namespace

char32_t byte_to_unicode(unsigned char byte) { return byte_maps().to_unicode[byte]; }

std::optional<unsigned char> unicode_to_byte(char32_t code_point) {
  if (code_point >= kMappedEnd) return std::nullopt;
  const int byte = byte_maps().to_byte[code_point];
  if (byte < 0) return std::nullopt;
  return static_cast<unsigned char>(byte);
}

std::string to_byte_level(std::string_view bytes) {
  const ByteMaps& maps = byte_maps();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char byte : bytes) out += maps.to_unicode_utf8[static_cast<unsigned char>(byte)];
  return out;
}

std::optional<std::string> from_byte_level(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (const char32_t code_point : to_code_points(token)) {
    const auto byte = unicode_to_byte(code_point);
    if (!byte) return std::nullopt;
    bytes += static_cast<char>(*byte);
  }
  return bytes;
}

}  // namespace graphed::tokenizer
