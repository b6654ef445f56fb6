// jinja/python_text.h — Python's str methods on UTF-8 text as chat templates use them (strip, split,
// replace, find, case changes, repr, slicing), counting code points as Python does. Case mapping covers
// ASCII, Latin-1, basic Greek and Cyrillic only (no ICU): other letters keep their case.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace graphed::jinja {

/// str.isspace() for one code point.
bool is_python_whitespace(char32_t code_point);

/// len(text) in code points.
std::size_t code_point_count(std::string_view text);

/// The code points of the text (an invalid UTF-8 sequence becomes U+FFFD).
std::u32string code_points_of(std::string_view text);

enum class StripSide { kBoth, kLeft, kRight };

/// str.strip/lstrip/rstrip: without `characters`, Unicode whitespace; otherwise any of its code points.
std::string python_strip(std::string_view text, const std::optional<std::string>& characters, StripSide side);

/// str.split(separator, max_split): without a separator, runs of whitespace (empty pieces dropped);
/// max_split < 0 means no limit. Throws EvaluationError for an empty separator.
std::vector<std::string> python_split(std::string_view text, const std::optional<std::string>& separator,
                                      int64_t max_split);

/// str.rsplit(separator, max_split): as python_split, splitting from the right.
std::vector<std::string> python_rsplit(std::string_view text, const std::optional<std::string>& separator,
                                       int64_t max_split);

/// str.splitlines() without keepends.
std::vector<std::string> python_splitlines(std::string_view text);

/// str.replace(old, new, count); count < 0 replaces all. An empty `old` inserts between code points.
std::string python_replace(std::string_view text, std::string_view old_text, std::string_view new_text, int64_t count);

/// str.find(sub): the code point index of the first occurrence, or -1.
int64_t python_find(std::string_view text, std::string_view sub);

/// str.rfind(sub): the code point index of the last occurrence, or -1.
int64_t python_rfind(std::string_view text, std::string_view sub);

/// str.count(sub): non-overlapping occurrences (len + 1 for an empty sub).
int64_t python_count(std::string_view text, std::string_view sub);

std::string python_upper(std::string_view text);
std::string python_lower(std::string_view text);
/// str.title(): a cased letter after an uncased character starts a word.
std::string python_title(std::string_view text);
/// str.capitalize(): first code point upper case, the rest lower case.
std::string python_capitalize(std::string_view text);
/// jinja2's title filter: words start after '-', whitespace, '(', '{', '[' or '<'.
std::string jinja_title(std::string_view text);
/// Number of runs of word characters (jinja2's wordcount filter, `\w+`).
int64_t word_count(std::string_view text);

/// markupsafe's escape(): & < > " ' as &amp; &lt; &gt; &#34; &#39;.
std::string html_escape(std::string_view text);

/// Python's repr() of a string: single quotes unless the text has ' and no ", escapes as Python.
std::string python_string_repr(std::string_view text);

/// The indexes a Python slice [start:stop:step] selects from a sequence of `length` items.
/// Throws EvaluationError for a zero step.
std::vector<int64_t> slice_indexes(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                   std::optional<int64_t> step);

/// The code point at a Python index (negative counts from the end), or nullopt when out of range.
std::optional<std::string> code_point_at(std::string_view text, int64_t index);

}  // namespace graphed::jinja
