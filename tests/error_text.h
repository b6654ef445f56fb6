// tests/error_text.h — runs an action and returns the message of the ErrorType it throws, or
// "(no error)", so tests can compare exact messages in one line.
#pragma once

#include <functional>
#include <string>

#include "graphed/util/error.h"

namespace graphed::testing {

template <typename ErrorType = Error>
std::string error_text(const std::function<void()>& action) {
  try {
    action();
  } catch (const ErrorType& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace graphed::testing
