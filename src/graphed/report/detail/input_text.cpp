// report/detail/input_text.cpp — see report/detail/input_text.h.
#include "graphed/report/detail/input_text.h"

#include <cctype>
#include <cstring>

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::report::detail {

std::string reason_of(int error) {
  std::string reason = std::strerror(error);
  if (!reason.empty()) reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
  return reason;
}

std::string read_input_text(const std::string& path) {
  std::string text;
  if (const int error = read_file(path, text)) {
    throw DataError("cannot read '" + path + "': " + reason_of(error) +
                    "; fix: check the path (graphed report takes metrics files, folders holding metrics.jsonl "
                    "and bench JSON files)");
  }
  return text;
}

std::string excerpt(const std::string& text) {
  constexpr std::size_t kMaxCharacters = 60;
  std::string line = text.substr(0, text.find('\n'));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.size() > kMaxCharacters) line = line.substr(0, kMaxCharacters) + "...";
  return line;
}

}  // namespace graphed::report::detail
