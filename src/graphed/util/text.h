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

/// Integers in brackets: bracketed({8, 128, -1}) == "[8, 128, -1]" (shapes, pipeline orders).
std::string bracketed(const std::vector<int64_t>& values);

/// Splits on the delimiter, trimming spaces; empty pieces are dropped ("a,,b" -> {"a","b"}).
std::vector<std::string> split(const std::string& text, char delimiter);

/// Levenshtein distance between two strings.
std::size_t edit_distance(const std::string& a, const std::string& b);

/// The candidate nearest to the word, if it is close enough to be a plausible typo
/// (distance <= max(2, size/3)); ties go to the first candidate.
std::optional<std::string> nearest_match(const std::string& word,
                                         const std::vector<std::string>& candidates);

/// Formats a floating-point value the shortest way that reads back exactly (0.1, 1e-05, 3).
std::string format_number(double value);

}  // namespace graphed
