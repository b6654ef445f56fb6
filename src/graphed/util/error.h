// util/error.h — graphed's one error family (STYLE.md rule 9) and the two check macros.
// User-triggerable failures throw a graphed::Error subclass whose message says what failed, the
// value, and the fix ("...; fix: ..."). Bugs use GRAPHED_INTERNAL_ASSERT. Only cli/main.cpp catches.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace graphed {

/// Base of every error a user can cause. what() is the full, user-facing message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// An invalid configuration; carries every issue found (not just the first) as formatted lines.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message, std::vector<std::string> details = {})
      : Error(message), details_(std::move(details)) {}
  /// One formatted line per issue ("error [TC-9]: ..."), in the order they were found.
  const std::vector<std::string>& details() const { return details_; }

 private:
  std::vector<std::string> details_;
};

/// A failed CUDA-graph capture, with its diagnosed cause and the fix.
class CaptureError : public Error {
 public:
  CaptureError(std::string cause, std::string fix)
      : Error(cause + "; fix: " + fix), cause_(std::move(cause)), fix_(std::move(fix)) {}
  /// From a whole message "<cause>; fix: <fix>" (as GRAPHED_CHECK builds it).
  explicit CaptureError(const std::string& message) : Error(message) {
    const std::size_t at = message.find("; fix: ");
    cause_ = message.substr(0, at);
    fix_ = at == std::string::npos ? std::string() : message.substr(at + 7);
  }
  const std::string& cause() const { return cause_; }
  const std::string& fix() const { return fix_; }

 private:
  std::string cause_;
  std::string fix_;
};

/// Bad or unreadable input data (token files, corpora, checkpoints).
class DataError : public Error {
 public:
  explicit DataError(const std::string& message) : Error(message) {}
};

/// A checkpoint that cannot be loaded: missing, corrupt, or saved by another model or device. The
/// message names the file, the tensor or field, what it holds and what was expected.
class CheckpointError : public DataError {
 public:
  explicit CheckpointError(const std::string& message) : DataError(message) {}
};

/// A multi-process run that cannot start or go on: a bad launch environment, an unreachable rendezvous,
/// a rank that failed or stopped answering. The message names the rank and what it waited for.
class DistributedError : public Error {
 public:
  explicit DistributedError(const std::string& message) : Error(message) {}
};

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
[[noreturn]] void throw_internal_error(const char* file, int line, const char* condition, const std::string& message);
}  // namespace detail

}  // namespace graphed

/// Throws ErrorType(message) when the condition is false. For mistakes a user can make.
#define GRAPHED_CHECK(condition, ErrorType, ...)               \
  do {                                                         \
    if (!(condition)) {                                        \
      throw ErrorType(::graphed::detail::concat(__VA_ARGS__)); \
    }                                                          \
  } while (false)

/// Marks a bug in graphed: throws a std::logic_error asking for a report.
#define GRAPHED_INTERNAL_ASSERT(condition, ...)                                              \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      ::graphed::detail::throw_internal_error(__FILE__, __LINE__, #condition,                \
                                              ::graphed::detail::concat("", ##__VA_ARGS__)); \
    }                                                                                        \
  } while (false)
