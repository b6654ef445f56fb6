// util/error.cpp — the out-of-line part of util/error.h.
#include "graphed/util/error.h"

namespace graphed::detail {

void throw_internal_error(const char* file, int line, const char* condition, const std::string& message) {
  std::ostringstream out;
  out << "internal error, please report: " << file << ":" << line << ": " << condition;
  if (!message.empty()) out << ": " << message;
  throw std::logic_error(out.str());
}

}  // namespace graphed::detail
