// serve/api_error.cpp — see serve/api_error.h.
#include "graphed/serve/api_error.h"

namespace graphed::serve {

nlohmann::ordered_json ApiError::body() const {
  nlohmann::ordered_json error{{"message", what()}, {"type", type_}};
  error["param"] = param_.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param_);
  error["code"] = status_;
  return {{"error", error}};
}

ApiError invalid_request(const std::string& message, const std::string& param) {
  return ApiError(400, "invalid_request_error", message, param);
}

}  // namespace graphed::serve
