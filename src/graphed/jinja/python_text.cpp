// jinja/python_text.cpp — Python str semantics on UTF-8: whitespace and case tables, strip/split,
// replace/find/count, repr() and slice arithmetic. Works on code points where Python counts them.
#include "graphed/jinja/python_text.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "graphed/jinja/value.h"
#include "graphed/util/utf8.h"

namespace graphed::jinja {
namespace {

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

/// Simple one-to-one upper-case mapping of the covered alphabets; other code points map to themselves.
char32_t upper_of(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 0x20;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 0x20;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  return c;
}

char32_t lower_of(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 0x20;
  if (c == 0x178) return 0xFF;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

/// Whether a code point has case for str.title(): letters we map, and every other non-ASCII letter-like
/// code point (so "wörld" keeps a lower-case 'r' as Python does).
bool is_cased(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return c >= 0xC0 && !is_python_whitespace(c) && c != 0xD7 && c != 0xF7;
}

/// Characters repr() escapes besides ASCII controls: C1 controls, format and separator characters,
/// private use (a subset of Python's non-printable set; unassigned code points are not known here).
bool is_unprintable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return true;
  if (c >= 0x80 && c <= 0xA0) return true;
  if (c == 0xAD || c == 0x1680 || c == 0x180E || c == 0x3000 || c == 0xFEFF) return true;
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F)) return true;
  if ((c >= 0xE000 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0xD800 && c <= 0xDFFF)) return true;
  return c > 0x10FFFF;
}

std::string utf8_of_range(const std::u32string& points, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end; ++i) append_utf8(out, points[i]);
  return out;
}

template <typename Mapping>
std::string map_code_points(std::string_view text, Mapping mapping) {
  std::string out;
  out.reserve(text.size());
  for (const char32_t c : code_points_of(text)) append_utf8(out, mapping(c));
  return out;
}

int64_t code_point_index_of_byte(std::string_view text, std::size_t byte_offset) {
  int64_t index = 0;
  for (std::size_t i = 0; i < byte_offset; ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++index;
  }
  return index;
}

std::vector<std::string> split_on_whitespace(const std::u32string& points, int64_t max_split, bool from_right) {
  std::vector<std::string> pieces;
  const auto size = static_cast<int64_t>(points.size());
  if (!from_right) {
    int64_t i = 0;
    while (i < size) {
      while (i < size && is_python_whitespace(points[i])) ++i;
      if (i == size) break;
      if (max_split >= 0 && static_cast<int64_t>(pieces.size()) == max_split) {
        pieces.push_back(utf8_of_range(points, i, size));  // the rest keeps its trailing whitespace
        break;
      }
      int64_t start = i;
      while (i < size && !is_python_whitespace(points[i])) ++i;
      pieces.push_back(utf8_of_range(points, start, i));
    }
    return pieces;
  }
  int64_t i = size;
  while (i > 0) {
    while (i > 0 && is_python_whitespace(points[i - 1])) --i;
    if (i == 0) break;
    if (max_split >= 0 && static_cast<int64_t>(pieces.size()) == max_split) {
      pieces.push_back(utf8_of_range(points, 0, i));  // the rest keeps its leading whitespace
      break;
    }
    int64_t end = i;
    while (i > 0 && !is_python_whitespace(points[i - 1])) --i;
    pieces.push_back(utf8_of_range(points, i, end));
  }
  std::reverse(pieces.begin(), pieces.end());
  return pieces;
}

void check_separator(const std::optional<std::string>& separator) {
  if (separator && separator->empty()) {
    throw EvaluationError("empty separator", "pass a non-empty separator to split(), or none to split on whitespace");
  }
}

}  // namespace

bool is_python_whitespace(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return true;
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::size_t code_point_count(std::string_view text) {
  std::size_t count = 0;
  for (const char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++count;
  }
  return count;
}

std::u32string code_points_of(std::string_view text) { return to_code_points(text); }

std::string python_strip(std::string_view text, const std::optional<std::string>& characters, StripSide side) {
  const std::u32string strip_set = characters ? code_points_of(*characters) : std::u32string();
  auto strips = [&](char32_t c) {
    return characters ? strip_set.find(c) != std::u32string::npos : is_python_whitespace(c);
  };
  const std::u32string points = code_points_of(text);
  std::size_t begin = 0;
  std::size_t end = points.size();
  if (side != StripSide::kRight) {
    while (begin < end && strips(points[begin])) ++begin;
  }
  if (side != StripSide::kLeft) {
    while (end > begin && strips(points[end - 1])) --end;
  }
  return utf8_of_range(points, begin, end);
}

std::vector<std::string> python_split(std::string_view text, const std::optional<std::string>& separator,
                                      int64_t max_split) {
  check_separator(separator);
  if (!separator) return split_on_whitespace(code_points_of(text), max_split, false);
  std::vector<std::string> pieces;
  std::size_t start = 0;
  while (max_split < 0 || static_cast<int64_t>(pieces.size()) < max_split) {
    const std::size_t at = text.find(*separator, start);
    if (at == std::string_view::npos) break;
    pieces.emplace_back(text.substr(start, at - start));
    start = at + separator->size();
  }
  pieces.emplace_back(text.substr(start));
  return pieces;
}

std::vector<std::string> python_rsplit(std::string_view text, const std::optional<std::string>& separator,
                                       int64_t max_split) {
  check_separator(separator);
  if (!separator) return split_on_whitespace(code_points_of(text), max_split, true);
  std::vector<std::string> pieces;
  std::size_t end = text.size();
  while (max_split < 0 || static_cast<int64_t>(pieces.size()) < max_split) {
    if (end < separator->size()) break;
    const std::size_t at = text.rfind(*separator, end - separator->size());
    if (at == std::string_view::npos) break;
    pieces.emplace_back(text.substr(at + separator->size(), end - at - separator->size()));
    end = at;
  }
  pieces.emplace_back(text.substr(0, end));
  std::reverse(pieces.begin(), pieces.end());
  return pieces;
}

std::vector<std::string> python_splitlines(std::string_view text) {
  const std::u32string points = code_points_of(text);
  std::vector<std::string> lines;
  std::size_t start = 0;
  std::size_t i = 0;
  while (i < points.size()) {
    const char32_t c = points[i];
    const bool breaks = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
                        c == 0x2028 || c == 0x2029;
    if (!breaks) {
      ++i;
      continue;
    }
    lines.push_back(utf8_of_range(points, start, i));
    i += (c == '\r' && i + 1 < points.size() && points[i + 1] == '\n') ? 2 : 1;
    start = i;
  }
  if (start < points.size()) lines.push_back(utf8_of_range(points, start, points.size()));
  return lines;
}

std::string python_replace(std::string_view text, std::string_view old_text, std::string_view new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {
    const std::u32string points = code_points_of(text);
    int64_t done = 0;
    for (std::size_t i = 0; i <= points.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(new_text);
        ++done;
      }
      if (i < points.size()) append_utf8(out, points[i]);
    }
    return out;
  }
  std::size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const std::size_t at = text.find(old_text, start);
    if (at == std::string_view::npos) break;
    out.append(text.substr(start, at - start));
    out.append(new_text);
    start = at + old_text.size();
    ++done;
  }
  out.append(text.substr(start));
  return out;
}

int64_t python_find(std::string_view text, std::string_view sub) {
  const std::size_t at = text.find(sub);
  if (at == std::string_view::npos) return -1;
  return is_ascii(text) ? static_cast<int64_t>(at) : code_point_index_of_byte(text, at);
}

int64_t python_rfind(std::string_view text, std::string_view sub) {
  const std::size_t at = text.rfind(sub);
  if (at == std::string_view::npos) return -1;
  return is_ascii(text) ? static_cast<int64_t>(at) : code_point_index_of_byte(text, at);
}

int64_t python_count(std::string_view text, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(code_point_count(text)) + 1;
  int64_t count = 0;
  for (std::size_t at = text.find(sub); at != std::string_view::npos; at = text.find(sub, at + sub.size())) ++count;
  return count;
}

std::string python_upper(std::string_view text) { return map_code_points(text, upper_of); }

std::string python_lower(std::string_view text) { return map_code_points(text, lower_of); }

std::string python_title(std::string_view text) {
  std::string out;
  bool previous_cased = false;
  for (const char32_t c : code_points_of(text)) {
    append_utf8(out, previous_cased ? lower_of(c) : upper_of(c));
    previous_cased = is_cased(c);
  }
  return out;
}

std::string python_capitalize(std::string_view text) {
  std::string out;
  bool first = true;
  for (const char32_t c : code_points_of(text)) {
    append_utf8(out, first ? upper_of(c) : lower_of(c));
    first = false;
  }
  return out;
}

std::string jinja_title(std::string_view text) {
  std::string out;
  bool word_start = true;
  for (const char32_t c : code_points_of(text)) {
    const bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_python_whitespace(c);
    append_utf8(out, separator ? c : (word_start ? upper_of(c) : lower_of(c)));
    word_start = separator;
  }
  return out;
}

int64_t word_count(std::string_view text) {
  int64_t count = 0;
  bool in_word = false;
  for (const char32_t c : code_points_of(text)) {
    const bool word_character = (c < 0x80) ? (std::isalnum(static_cast<int>(c)) != 0 || c == '_')
                                           : (c >= 0xAA && !is_python_whitespace(c) && !is_unprintable(c) &&
                                              !(c >= 0x2010 && c <= 0x206F) && !(c >= 0x3000 && c <= 0x303F));
    if (word_character && !in_word) ++count;
    in_word = word_character;
  }
  return count;
}

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string python_string_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (const char32_t c : code_points_of(text)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (is_unprintable(c)) {
      char buffer[16];
      if (c < 0x100) {
        std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buffer, sizeof buffer, "\\U%08x", static_cast<unsigned>(c));
      }
      out += buffer;
    } else {
      append_utf8(out, c);
    }
  }
  out += quote;
  return out;
}

std::vector<int64_t> slice_indexes(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                   std::optional<int64_t> step) {
  const int64_t stride = step.value_or(1);
  if (stride == 0) throw EvaluationError("slice step cannot be zero", "use a step such as 1 or -1");
  auto adjust = [&](std::optional<int64_t> bound, bool is_start) {
    if (!bound) {
      if (stride < 0) return is_start ? length - 1 : int64_t{-1};
      return is_start ? int64_t{0} : length;
    }
    int64_t position = *bound;
    if (position < 0) {
      position += length;
      if (position < 0) position = stride < 0 ? -1 : 0;
    } else if (position >= length) {
      position = stride < 0 ? length - 1 : length;
    }
    return position;
  };
  const int64_t first = adjust(start, true);
  const int64_t last = adjust(stop, false);
  std::vector<int64_t> indexes;
  for (int64_t i = first; stride > 0 ? i < last : i > last; i += stride) indexes.push_back(i);
  return indexes;
}

std::optional<std::string> code_point_at(std::string_view text, int64_t index) {
  if (is_ascii(text)) {
    const auto size = static_cast<int64_t>(text.size());
    if (index < 0) index += size;
    if (index < 0 || index >= size) return std::nullopt;
    return std::string(1, text[static_cast<std::size_t>(index)]);
  }
  const std::u32string points = code_points_of(text);
  const auto size = static_cast<int64_t>(points.size());
  if (index < 0) index += size;
  if (index < 0 || index >= size) return std::nullopt;
  return utf8_of(points[static_cast<std::size_t>(index)]);
}

}  // namespace graphed::jinja
