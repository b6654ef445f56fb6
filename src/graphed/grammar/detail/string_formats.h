// grammar/detail/string_formats.h — JSON schema's string `format`s that structured output follows, each as an
// anchored pattern whose every match is a valid value of the format (a few valid values are left out where a
// pattern cannot tell them: February 29th, leap seconds, email's quoted local parts).
#pragma once

#include <string>

namespace graphed::grammar::detail {

/// The pattern of the format, or an empty string for a format graphed does not follow.
std::string format_pattern(const std::string& format);

/// The formats graphed follows, for messages: "date-time, date, time, uuid, ipv4, email".
std::string supported_formats();

}  // namespace graphed::grammar::detail
