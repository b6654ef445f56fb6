// serve/sampling_fields.cpp — see serve/sampling_fields.h. The ranges are the engine's (infer/request.h), so that a
// request the protocol takes is one the engine takes; each refusal says what came and what to send.
#include "graphed/serve/sampling_fields.h"

#include <limits>

#include "graphed/serve/api_error.h"
#include "graphed/serve/json_fields.h"
#include "graphed/util/text.h"

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

constexpr double kMaxBias = 100;  // OpenAI's range, which it clamps to and graphed refuses beyond

/// A token id written as a JSON object's key ("50256"), or -1 when the key is not one.
int64_t token_id_of(const std::string& key) {
  if (key.empty() || key.size() > 18) return -1;
  int64_t id = 0;
  for (char digit : key) {
    if (digit < '0' || digit > '9') return -1;
    id = id * 10 + (digit - '0');
  }
  return id;
}

std::vector<std::pair<int64_t, double>> read_logit_bias(const json& body) {
  std::vector<std::pair<int64_t, double>> biases;
  const json* bias = field_of(body, "logit_bias");
  if (bias == nullptr) return biases;
  const std::string wanted = "an object of token ids (as strings) to biases from -100 to 100, e.g. {\"50256\": -100}";
  if (!bias->is_object()) wrong_type("logit_bias", *bias, wanted);
  for (const auto& [key, value] : bias->items()) {
    const int64_t id = token_id_of(key);
    if (id < 0) {
      throw invalid_request("'logit_bias' has the key \"" + key + "\", which is not a token id; send " + wanted,
                            "logit_bias");
    }
    if (!value.is_number()) {
      throw invalid_request("'logit_bias' gives token " + key + " " + kind_of(value) + "; send " + wanted,
                            "logit_bias");
    }
    const double amount = value.get<double>();
    if (!(amount >= -kMaxBias && amount <= kMaxBias)) {
      throw invalid_request("'logit_bias' gives token " + key + " a bias of " + format_number(amount) +
                                "; send biases from -100 to 100 (-100 bans the token, 100 makes it all but certain)",
                            "logit_bias");
    }
    if (amount != 0) biases.emplace_back(id, amount);
  }
  return biases;
}

double read_repetition_penalty(const json& body) {
  const json* value = field_of(body, "repetition_penalty");
  if (value == nullptr) return 1.0;
  const std::string wanted = "a number above 0 (1 = none, above 1 discourages repeats)";
  if (!value->is_number()) wrong_type("repetition_penalty", *value, wanted);
  const double penalty = value->get<double>();
  if (!(penalty > 0 && penalty <= std::numeric_limits<double>::max())) {
    throw invalid_request("'repetition_penalty' is " + format_number(penalty) + "; send " + wanted,
                          "repetition_penalty");
  }
  return penalty;
}

/// A completion's logprobs: an integer k, or false (none).
int64_t completion_logprobs(const json& body) {
  const json* value = field_of(body, "logprobs");
  if (value != nullptr && value->is_boolean() && !value->get<bool>()) return -1;
  if (value != nullptr && !value->is_number_integer()) {
    wrong_type("logprobs", *value,
               "an integer from 0 to 20: the likeliest alternatives to list beside each token's log probability");
  }
  if (field_of(body, "top_logprobs") != nullptr) {
    throw invalid_request(
        "'top_logprobs' is a chat completions field; for completions send 'logprobs': k (0 to 20) alone",
        "top_logprobs");
  }
  return integer_in(body, "logprobs", 0, kMaxLogprobs).value_or(-1);
}

/// A chat's logprobs: true or false, with top_logprobs: k only beside true.
int64_t chat_logprobs(const json& body) {
  const bool wanted = boolean_in(body, "logprobs", false);
  const auto top = integer_in(body, "top_logprobs", 0, kMaxLogprobs);
  if (top && !wanted) {
    throw invalid_request("'top_logprobs' needs 'logprobs': true; send both, or leave top_logprobs out",
                          "top_logprobs");
  }
  return wanted ? top.value_or(0) : -1;
}

}  // namespace

std::string SamplingFields::first_control() const {
  if (presence_penalty != 0) return "presence_penalty";
  if (frequency_penalty != 0) return "frequency_penalty";
  if (repetition_penalty != 1) return "repetition_penalty";
  if (!logit_bias.empty()) return "logit_bias";
  if (min_tokens > 0) return "min_tokens";
  if (min_p > 0) return "min_p";
  return "";
}

SamplingFields read_sampling_fields(const json& body, LogprobsForm form) {
  SamplingFields fields;
  fields.presence_penalty = number_in(body, "presence_penalty", 0.0, -2.0, 2.0);
  fields.frequency_penalty = number_in(body, "frequency_penalty", 0.0, -2.0, 2.0);
  fields.repetition_penalty = read_repetition_penalty(body);
  fields.logit_bias = read_logit_bias(body);
  fields.min_tokens = integer_in(body, "min_tokens", 0, std::numeric_limits<int32_t>::max()).value_or(0);
  fields.min_p = number_in(body, "min_p", 0.0, 0.0, 1.0);
  fields.logprobs = form == LogprobsForm::kCompletion ? completion_logprobs(body) : chat_logprobs(body);
  return fields;
}

}  // namespace graphed::serve
