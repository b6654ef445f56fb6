// serve/api_error.h — an error a client caused or must be told of, in OpenAI's shape: the HTTP status,
// the error type ("invalid_request_error", ...), the request field at fault, and a message that says what
// was wrong and what to send instead. Handlers throw it; the server turns it into the JSON body.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "graphed/util/error.h"

namespace graphed::serve {

class ApiError : public Error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = "")
      : Error(message), status_(status), type_(std::move(type)), param_(std::move(param)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }

  /// {"error": {"message", "type", "param", "code"}}, as OpenAI's API answers.
  nlohmann::ordered_json body() const;

 private:
  int status_;
  std::string type_;
  std::string param_;
};

/// 400: a field is missing, of the wrong type or out of range. `param` names the field.
ApiError invalid_request(const std::string& message, const std::string& param = "");

}  // namespace graphed::serve
