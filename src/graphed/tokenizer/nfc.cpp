// tokenizer/nfc.cpp — see tokenizer/nfc.h. The composition step follows the sample code of UAX #15: a
// character composes with the last starter unless a character of equal or higher combining class
// stands between them.
#include "graphed/tokenizer/nfc.h"

#include <algorithm>
#include <optional>

#include "graphed/tokenizer/unicode_properties.h"
#include "graphed/util/utf8.h"

namespace graphed::tokenizer {
namespace {

std::u32string decompose(const std::u32string& code_points) {
  std::u32string result;
  result.reserve(code_points.size());
  for (const char32_t code_point : code_points) {
    const std::u32string parts = canonical_decomposition(code_point);
    if (parts.empty()) {
      result += code_point;
    } else {
      result += parts;
    }
  }
  return result;
}

/// Stable sort of each run of non-starters by combining class.
void order_canonically(std::u32string& code_points) {
  std::size_t at = 0;
  while (at < code_points.size()) {
    if (combining_class(code_points[at]) == 0) {
      ++at;
      continue;
    }
    std::size_t end = at;
    while (end < code_points.size() && combining_class(code_points[end]) != 0) ++end;
    std::stable_sort(code_points.begin() + static_cast<std::ptrdiff_t>(at),
                     code_points.begin() + static_cast<std::ptrdiff_t>(end),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    at = end;
  }
}

void compose(std::u32string& code_points) {
  std::optional<std::size_t> starter_at;  // the last starter kept, if any
  int last_class = 0;                     // combining class of the last code point kept
  std::size_t write_at = 0;
  for (std::size_t read_at = 0; read_at < code_points.size(); ++read_at) {
    const char32_t code_point = code_points[read_at];
    const int code_point_class = combining_class(code_point);
    if (starter_at && (last_class == 0 || last_class < code_point_class)) {
      if (const auto composite = compose_pair(code_points[*starter_at], code_point)) {
        code_points[*starter_at] = *composite;
        continue;
      }
    }
    if (code_point_class == 0) starter_at = write_at;
    last_class = code_point_class;
    code_points[write_at++] = code_point;
  }
  code_points.resize(write_at);
}

}  // namespace

std::u32string normalize_nfc(const std::u32string& code_points) {
  std::u32string result = decompose(code_points);
  order_canonically(result);
  compose(result);
  return result;
}

std::string normalize_nfc(std::string_view text) {
  const bool ascii =
      std::all_of(text.begin(), text.end(), [](char byte) { return static_cast<unsigned char>(byte) < 0x80; });
  if (ascii) return std::string(text);
  return to_utf8(normalize_nfc(to_code_points(text)));
}

}  // namespace graphed::tokenizer
