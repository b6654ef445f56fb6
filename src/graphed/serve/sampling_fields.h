// serve/sampling_fields.h — the request fields that change a request's draws beyond temperature, top-p and top-k
// (OpenAI's presence_penalty, frequency_penalty and logit_bias; vLLM's repetition_penalty, min_tokens and min_p),
// and the log probabilities it asks for (a completion's `logprobs: k`; a chat's `logprobs: true` with
// `top_logprobs: k`), read and checked against the engine's ranges with 400s that name the field. Mapping them to
// the engine's options, and the checks that need the model (ids inside the vocabulary, min_tokens against the
// default max_tokens), are the handlers' (serve/completion_handlers.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace graphed::serve {

/// The most alternatives per token a request may ask for (OpenAI's top_logprobs limit; its legacy completions
/// stop at 5, graphed takes up to 20 on both endpoints).
constexpr int64_t kMaxLogprobs = 20;

struct SamplingFields {
  double presence_penalty = 0;    ///< -2 to 2: subtracted from the logit of each token drawn before
  double frequency_penalty = 0;   ///< -2 to 2: subtracted once per time a token was drawn before
  double repetition_penalty = 1;  ///< above 0 (vLLM's): 1 = none
  std::vector<std::pair<int64_t, double>> logit_bias;  ///< (token id, bias from -100 to 100), as sent
  int64_t min_tokens = 0;                              ///< the end tokens cannot come before this many tokens
  double min_p = 0;                                    ///< 0 to 1; 0 = all tokens
  int64_t logprobs = -1;  ///< -1: none; 0 to kMaxLogprobs: each token's log probability and this many alternatives

  /// The request field of the first control set ("presence_penalty", ..., "min_p"), or "" when none is: the param
  /// of an error about them all (the engine refuses them together under tensor parallelism).
  std::string first_control() const;
};

/// Which endpoint's form `logprobs` takes.
enum class LogprobsForm {
  kCompletion,  ///< logprobs: an integer k (false or null: none)
  kChat,        ///< logprobs: true or false, and top_logprobs: k (default 0) with logprobs true
};

/// Reads the fields; ApiError 400 naming the first one out of range or of the wrong type.
SamplingFields read_sampling_fields(const nlohmann::ordered_json& body, LogprobsForm form);

}  // namespace graphed::serve
