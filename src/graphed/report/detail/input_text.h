// report/detail/input_text.h — what the report readers share: reading an input file with a worded
// error, and a short excerpt of a bad line for messages. Internal to report/.
#pragma once

#include <string>

namespace graphed::report::detail {

/// The file's contents. Throws DataError naming the path and the reason when it cannot be read.
std::string read_input_text(const std::string& path);

/// The text on one line, cut to about 60 characters with "..." (for error messages).
std::string excerpt(const std::string& text);

/// The reason for an errno value, lower-case ("no such file or directory").
std::string reason_of(int error);

}  // namespace graphed::report::detail
