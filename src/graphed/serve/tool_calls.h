// serve/tool_calls.h — a chat model's tool calls read out of its reply, in the format its chat template teaches:
// Hermes-style blocks (`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`: Qwen2.5, Qwen3, Hermes) or
// Llama 3.x's JSON calls (`{"name": ..., "parameters": {...}}`, after an optional `<|python_tag|>`, several joined by
// ';'). A whole reply is read at once (parse_tool_calls); a streamed one through ToolCallStream, which lets content go
// out as it comes until a call may be starting and holds the rest back to read at the end. With tool_choice required
// or a named function, serve/tool_call_grammar.h constrains the reply to this format, so it always reads back.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace graphed::serve {

enum class ToolCallFormat {
  kNone,       ///< the template teaches no format graphed reads: tool calls stay text
  kHermes,     ///< <tool_call> blocks of {"name", "arguments"}
  kLlamaJson,  ///< the whole reply one or more {"name", "parameters"} objects
};

/// The format a chat template teaches, from its source: kHermes where it writes `<tool_call>`, kLlamaJson where it
/// writes `<|python_tag|>` or asks for `"parameters"` in a JSON call; else kNone.
ToolCallFormat tool_call_format_of(const std::string& template_source);

struct ToolCall {
  std::string id;  ///< "call_..." once the server names it (empty as parsed)
  std::string name;
  std::string arguments;  ///< a JSON object as text, as OpenAI's function.arguments carries it
};

/// A reply that holds tool calls: the text before them (nullopt when there is none but whitespace), then the calls.
struct ToolCallReply {
  std::optional<std::string> content;
  std::vector<ToolCall> calls;
};

/// The tool calls in a whole reply, or nullopt when it holds none that parse: each call must name one of `tools`
/// and carry an object of arguments, or the reply is content as it stands.
std::optional<ToolCallReply> parse_tool_calls(const std::string& text, ToolCallFormat format,
                                              const std::vector<std::string>& tools);

/// A streamed reply split into content that can go out at once and a tail that may be a tool call.
class ToolCallStream {
 public:
  ToolCallStream(ToolCallFormat format, std::vector<std::string> tools);

  /// The content to send now, given the reply's next piece (empty while the text may be a call's start).
  std::string feed(const std::string& piece);
  /// At the reply's end: the calls in what was held back (their `content` is what went out before them), or
  /// nullopt, when the held-back text is content after all: held() says what is still to send.
  std::optional<ToolCallReply> finish();
  const std::string& held() const { return held_; }

 private:
  ToolCallFormat format_;
  std::vector<std::string> tools_;
  std::string sent_;      // content released so far
  std::string held_;      // text held back: a call's possible start, or a call
  bool calling_ = false;  // the held text has started a call (it is no longer released)
};

}  // namespace graphed::serve
