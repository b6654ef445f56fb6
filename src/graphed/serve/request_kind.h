// serve/request_kind.h — what differs between a completion (POST /v1/completions) and a chat completion
// (POST /v1/chat/completions) once their prompts are ids: the id prefix, the field the prompt came in, the
// default max_tokens, the response body and stream chunks, the chunks a stream opens with, and the shape of its
// log probabilities. Each route's
// handler picks its kind once; the generation path they share (serve/completion_handlers.cpp) only calls it.
// Reading the request bodies is not here (serve/openai_protocol.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphed/serve/logprobs_output.h"
#include "graphed/serve/openai_protocol.h"

namespace graphed::serve {

class RequestKind {
 public:
  virtual ~RequestKind() = default;

  /// The start of a response's id: "cmpl-" or "chatcmpl-".
  virtual std::string id_prefix() const = 0;
  /// The request field the prompt came in ("prompt" or "messages"): the param of an error about it.
  virtual std::string prompt_param() const = 0;
  /// The tokens to generate when the request sets no max_tokens, for a prompt of `prompt_length` ids in a
  /// context of `context` positions (OpenAI's defaults: 16 for a completion; a chat may use what is left).
  virtual int64_t default_max_tokens(int64_t prompt_length, int64_t context) const = 0;
  /// A whole answer: one choice per prompt and draw (n), index in order.
  virtual nlohmann::ordered_json body(const ResponseHeader& header, const std::vector<ChoiceText>& choices,
                                      const Usage& usage) const = 0;
  /// The chunks a stream sends before the text of the choice at `index` (a chat's assistant role); none for a
  /// completion.
  virtual std::vector<nlohmann::ordered_json> opening_chunks(const ResponseHeader& header, int64_t index) const = 0;
  /// A stream's chunk of the choice at `index`: a piece of its text, or its end (an empty piece and the
  /// finish_reason), with the logprobs of the tokens whose text it carries (null when not asked for).
  virtual nlohmann::ordered_json chunk(const ResponseHeader& header, int64_t index, const std::string& piece,
                                       const std::optional<std::string>& finish_reason,
                                       const nlohmann::ordered_json& logprobs = nullptr) const = 0;
  /// The logprobs object of `tokens` in the endpoint's shape (serve/logprobs_output.h); `text_offset` (the
  /// characters of the choice's text before them) moves past them where the shape counts it.
  virtual nlohmann::ordered_json logprobs(const std::vector<TokenLogprob>& tokens, const VocabularyTable& table,
                                          int64_t& text_offset) const = 0;
  /// The "object" of the usage chunk that ends a stream with include_usage.
  virtual std::string chunk_object() const = 0;
};

/// The kinds, stateless and alive for the whole program (a stream may outlive its handler's call).
const RequestKind& completion_kind();
const RequestKind& chat_kind();

}  // namespace graphed::serve
