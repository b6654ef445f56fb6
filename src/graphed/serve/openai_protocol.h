// serve/openai_protocol.h — OpenAI's completions and chat completions API as data: a request body read
// into checked fields (a wrong type, a value out of range or a feature graphed does not have is an
// ApiError naming the field and what to send), and the response bodies and stream chunks built back.
// Bodies are ordered JSON: a request's objects keep their key order (a tool's schema reaches the chat
// template as the client wrote it, as Python's dicts keep it), and responses list OpenAI's keys in order.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphed/serve/sampling_fields.h"
#include "graphed/serve/tool_calls.h"

namespace graphed::serve {

struct CompiledGrammar;

/// The generation fields both endpoints share. Defaults are OpenAI's (temperature 1, top_p 1).
struct GenerationFields {
  std::optional<int64_t> max_tokens;  ///< max_tokens / max_completion_tokens; unset = the endpoint's default
  double temperature = 1.0;           ///< 0 = greedy
  double top_p = 1.0;
  int64_t top_k = 0;                      ///< 0 (or -1) = all ids
  std::optional<uint64_t> seed;           ///< unset = a fresh seed per request
  std::vector<std::string> stop_strings;  ///< stop: strings that end the text (not included in it)
  std::vector<int64_t> stop_ids;          ///< stop's integers and stop_token_ids: ids that end it
  bool ignore_eos = false;                ///< ignore_eos: the model's end tokens do not stop it
  int64_t choices = 1;                    ///< n: choices per prompt, each drawn as a request of its own
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage: a last chunk with the usage
  /// Penalties, logit_bias, min_tokens, min_p, and the log probabilities asked for (serve/sampling_fields.h).
  SamplingFields sampling;
  /// What the output must follow (response_format, vLLM's structured_outputs or guided_*, or a chat's tool_choice that
  /// requires a call), compiled once and shared by every choice; null: anything.
  std::shared_ptr<CompiledGrammar> grammar;
  std::string grammar_param;  ///< the field the grammar came from, for errors: "response_format", "tool_choice", ...
};

/// One prompt of a completion request.
struct PromptInput {
  std::optional<std::string> text;  ///< the prompt as text
  std::vector<int64_t> ids;         ///< the prompt as token ids (when text is unset)
};

struct CompletionRequest {
  std::string model;
  /// One or more (a list of strings or of id lists): each prompt gets its own choice, index in order.
  std::vector<PromptInput> prompts;
  GenerationFields generation;
};

/// What a chat's tool_choice asks of the reply.
enum class ToolChoice {
  kAuto,      ///< the reply may call any of the tools (read from its text), or not (the default)
  kNone,      ///< the reply is text, whatever it holds
  kRequired,  ///< the reply is one or more calls (one without parallel_tool_calls), drawn under their grammar
  kFunction,  ///< the reply is one call of the named function, drawn under its grammar
};

struct ChatRequest {
  std::string model;
  /// Checked: roles known, content a string (text parts joined) or null, an assistant's tool-call arguments parsed
  /// from JSON text into objects.
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;  ///< null when none
  ToolChoice tool_choice = ToolChoice::kAuto;
  /// The functions the reply may call (tools' function names; only the named one for kFunction); empty when none or
  /// with tool_choice "none", when a reply is text whatever it holds.
  std::vector<std::string> callable;
  bool parallel_tool_calls = true;         ///< false: a reply's first call only
  nlohmann::ordered_json template_kwargs;  ///< chat_template_kwargs (e.g. enable_thinking), an object
  bool add_generation_prompt = true;
  GenerationFields generation;
};

/// Parses a request body; ApiError 400 when it is not JSON or not an object.
nlohmann::ordered_json parse_body(const std::string& text);
/// Throws ApiError (400) naming the first field at fault. A response_format schema is compiled here (its n choices
/// share it); a tool_choice that requires a call is checked against the tools here, its grammar made by the handler
/// (it needs the chat template's format).
CompletionRequest parse_completion_request(const nlohmann::ordered_json& body);
ChatRequest parse_chat_request(const nlohmann::ordered_json& body);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  nlohmann::ordered_json to_json() const;
};

/// What one response or chunk is about.
struct ResponseHeader {
  std::string id;  ///< "cmpl-..." or "chatcmpl-..."
  std::string model;
  int64_t created = 0;  ///< Unix seconds
};

/// One finished choice of a completion.
struct ChoiceText {
  std::string text;
  std::string finish_reason;
  /// A chat reply read as tool calls (then `text` is unused: the reply's content is the calls' content).
  std::optional<ToolCallReply> tool_calls;
  /// The choice's logprobs object in its endpoint's shape (serve/logprobs_output.h); null when not asked for.
  nlohmann::ordered_json logprobs = nullptr;
};

/// A text_completion with one choice per prompt, index in order.
nlohmann::ordered_json completion_body(const ResponseHeader& header, const std::vector<ChoiceText>& choices,
                                       const Usage& usage);
/// A text_completion chunk of the choice at `index`; finish_reason null while the text goes on; `logprobs` those of
/// the chunk's tokens (null when not asked for).
nlohmann::ordered_json completion_chunk(const ResponseHeader& header, int64_t index, const std::string& text,
                                        const std::optional<std::string>& finish_reason,
                                        const nlohmann::ordered_json& logprobs = nullptr);
/// A chat.completion with a choice per reply (n of them), index in order: a reply's text as the message's
/// content, or, with tool calls, their content (null when none) and message.tool_calls.
nlohmann::ordered_json chat_body(const ResponseHeader& header, const std::vector<ChoiceText>& choices,
                                 const Usage& usage);
/// A chat.completion.chunk of the choice at `index` whose delta holds its reply's tool calls, whole (index, id,
/// type, function).
nlohmann::ordered_json chat_tool_calls_chunk(const ResponseHeader& header, int64_t index,
                                             const std::vector<ToolCall>& calls,
                                             const nlohmann::ordered_json& logprobs = nullptr);
/// A chat.completion.chunk of the choice at `index`, whose delta is {"role": "assistant", "content": ""} first,
/// then {"content": ...}.
nlohmann::ordered_json chat_chunk(const ResponseHeader& header, int64_t index, const nlohmann::ordered_json& delta,
                                  const std::optional<std::string>& finish_reason,
                                  const nlohmann::ordered_json& logprobs = nullptr);
/// The last chunk of a stream with include_usage: no choices, the usage.
nlohmann::ordered_json usage_chunk(const ResponseHeader& header, const std::string& object, const Usage& usage);

}  // namespace graphed::serve
