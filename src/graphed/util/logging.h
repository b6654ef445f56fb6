// util/logging.h — the only logging graphed does: info and warnings to stderr (rank 0 by default,
// like llm.c's printf0) and LLVM-style debug channels switched on by `--debug CHANNEL`.
// Nothing here may run inside a captured region: it is host-side only.
#pragma once

#include <sstream>
#include <string>

namespace graphed {

/// Prints "message" to stderr on rank 0.
void log_info(const std::string& message);
/// Prints "warning: message" to stderr on rank 0.
void log_warn(const std::string& message);

/// Sets this process's rank; only rank 0 logs (default 0).
void set_log_rank(int rank);
/// The rank set_log_rank gave (0 by default).
int log_rank();

/// Turns on a debug channel ("capture", "config", ...). "all" turns every channel on.
void enable_debug_channel(const std::string& channel);
/// Whether a debug channel is on.
bool is_debug_channel_enabled(const std::string& channel);
/// Prints "[debug channel] message" to stderr when the channel is on.
void log_debug(const std::string& channel, const std::string& message);

}  // namespace graphed

/// GRAPHED_DEBUG("capture", "captured " << n << " graphs") — the message is built only when the
/// channel is on.
#define GRAPHED_DEBUG(channel, stream_expression)              \
  do {                                                         \
    if (::graphed::is_debug_channel_enabled(channel)) {        \
      std::ostringstream graphed_debug_out_;                   \
      graphed_debug_out_ << stream_expression;                 \
      ::graphed::log_debug(channel, graphed_debug_out_.str()); \
    }                                                          \
  } while (false)
