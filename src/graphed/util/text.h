// util/text.h — small string helpers shared by config/ and cli/: joining, splitting, quoting and
// "did you mean" suggestions by edit distance. No torch, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace graphed {

/// Joins the parts with the separator: join({"a","b"}, ", ") == "a, b".
std::string join(const std::vector<std::string>& parts, const std::string& separator);

/// Names in quotes, the first `shown` of them: "'a', 'b', 'c', 'd', 'e' and 3 more".
std::string quoted_list(const std::vector<std::string>& names, std::size_t shown = 5);

/// Integers in brackets: bracketed({8, 128, -1}) == "[8, 128, -1]" (shapes, pipeline orders).
std::string bracketed(const std::vector<int64_t>& values);

/// Splits on the delimiter, trimming spaces; empty pieces are dropped ("a,,b" -> {"a","b"}).
std::vector<std::string> split(const std::string& text, char delimiter);

/// Levenshtein distance between two strings.
std::size_t edit_distance(const std::string& a, const std::string& b);

/// The candidate nearest to the word, if it is close enough to be a plausible typo
/// (distance <= max(2, size/3)); ties go to the first candidate.
std::optional<std::string> nearest_match(const std::string& word, const std::vector<std::string>& candidates);

/// A library's exception message without its leading "[tag] " ("[json.exception.parse_error.101] parse
/// error at line 1" -> "parse error at line 1"), for wrapping into a message of graphed's own.
std::string without_library_tag(const std::string& message);

/// "1 tensor", "3 tensors": a count and its noun, with a plural s when the count is not 1.
std::string counted(std::size_t count, const std::string& noun);

/// A count rounded to an integer with thousands separators: group_thousands(12345.6) == "12,346".
std::string group_thousands(double value);

/// Formats a floating-point value the shortest way that reads back exactly (0.1, 1e-05, 3).
std::string format_number(double value);

/// value with exactly `decimals` digits after the point ("%.*f"): 2.50, 1,234.0 without grouping.
std::string fixed_decimals(double value, int decimals);

/// Text on one quoted line of a log (a training sample): newlines as '|', other control characters as
/// '?', everything else (printable ASCII, every byte of a UTF-8 character) as it is.
std::string quoted_one_line(const std::string& text);

}  // namespace graphed
