// serve/logprobs_output.h — the log probabilities of a choice's tokens in OpenAI's shapes: a completion's
// {tokens, token_logprobs, top_logprobs: [{text: logprob}], text_offset} and a chat's {content: [{token, logprob,
// bytes, top_logprobs: [{token, logprob, bytes}]}]}. A token's text is the tokenizer's decode of that one id, its
// bytes what it adds to the decoded text (serve/vocabulary_table.h); the numbers are the engine's, from the model's
// logits before penalties, bias, masks and temperature.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphed/serve/vocabulary_table.h"

namespace graphed::serve {

/// One drawn token's log probability and the likeliest tokens' (ids and log probabilities, likeliest first).
struct TokenLogprob {
  int64_t token = 0;
  double logprob = 0;
  std::vector<std::pair<int64_t, double>> top;
};

/// A completion's logprobs of `tokens`, the first starting `text_offset` characters (code points) into the choice's
/// text; moves text_offset past their texts, where a stream's next chunk goes on. top_logprobs holds the
/// alternatives and the drawn token (OpenAI's "up to logprobs + 1"), one entry per text (the likelier kept).
nlohmann::ordered_json completion_logprobs(const std::vector<TokenLogprob>& tokens, const VocabularyTable& table,
                                           int64_t& text_offset);

/// A chat's logprobs of `tokens`: {"content": [...]}, each with exactly the alternatives the engine gave.
nlohmann::ordered_json chat_logprobs(const std::vector<TokenLogprob>& tokens, const VocabularyTable& table);

}  // namespace graphed::serve
