// serve/tool_calls.cpp — see serve/tool_calls.h. Read leniently, as vLLM's parsers read: text between or after
// Hermes blocks is dropped, a last block may lack its closing tag (the model stopped at its end token), and
// arguments sent as a JSON string holding an object are taken as that object. What does not parse stays content.
#include "graphed/serve/tool_calls.h"

#include <algorithm>
#include <string_view>

#include <nlohmann/json.hpp>

namespace graphed::serve {
namespace {

using json = nlohmann::json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view without_leading_space(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  return text;
}

bool only_space(std::string_view text) { return without_leading_space(text).empty(); }

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && text.substr(0, prefix.size()) == prefix;
}

/// The longest end of `text` that is a proper start of `tag` (what may still grow into the tag).
std::size_t partial_tag_at_end(std::string_view text, std::string_view tag) {
  for (std::size_t length = std::min(text.size(), tag.size() - 1); length > 0; --length) {
    if (text.substr(text.size() - length) == tag.substr(0, length)) return length;
  }
  return 0;
}

/// Where the JSON object that `text` starts with ends (one past its closing brace), or npos when it does not close.
std::size_t object_end(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if ((c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

/// A call from {"name": one of tools, "arguments" or "parameters": an object (or a string holding one)}.
std::optional<ToolCall> call_of(std::string_view text, const std::vector<std::string>& tools) {
  const json object = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) return std::nullopt;
  const auto name = object.find("name");
  if (name == object.end() || !name->is_string()) return std::nullopt;
  if (std::find(tools.begin(), tools.end(), name->get<std::string>()) == tools.end()) return std::nullopt;
  json arguments = json::object();
  for (const char* key : {"arguments", "parameters"}) {
    if (object.contains(key)) {
      arguments = object.at(key);
      break;
    }
  }
  if (arguments.is_string()) {
    const std::string inner = arguments.get<std::string>();
    arguments = json::parse(inner, nullptr, /*allow_exceptions=*/false);
  }
  if (!arguments.is_object()) return std::nullopt;
  return ToolCall{"", name->get<std::string>(), arguments.dump()};
}

std::optional<ToolCallReply> parse_hermes(const std::string& text, const std::vector<std::string>& tools) {
  std::size_t open = text.find(kHermesOpen);
  if (open == std::string::npos) return std::nullopt;
  ToolCallReply reply;
  if (!only_space(std::string_view(text).substr(0, open))) reply.content = text.substr(0, open);
  while (open != std::string::npos) {
    const std::size_t start = open + kHermesOpen.size();
    const std::size_t close = text.find(kHermesClose, start);
    const std::size_t next = text.find(kHermesOpen, start);
    if (next < close) return std::nullopt;  // a block opened inside another
    const auto call = call_of(
        std::string_view(text).substr(start, close == std::string::npos ? std::string::npos : close - start), tools);
    if (!call) return std::nullopt;
    reply.calls.push_back(*call);
    open = close == std::string::npos ? std::string::npos : text.find(kHermesOpen, close + kHermesClose.size());
  }
  return reply;
}

std::optional<ToolCallReply> parse_llama_json(const std::string& text, const std::vector<std::string>& tools) {
  std::string_view rest = without_leading_space(text);
  if (starts_with(rest, kPythonTag)) rest.remove_prefix(kPythonTag.size());
  ToolCallReply reply;
  for (rest = without_leading_space(rest); !rest.empty(); rest = without_leading_space(rest)) {
    const std::size_t end = rest.front() == '{' ? object_end(rest) : std::string_view::npos;
    if (end == std::string_view::npos) return std::nullopt;
    const auto call = call_of(rest.substr(0, end), tools);
    if (!call) return std::nullopt;
    reply.calls.push_back(*call);
    rest = without_leading_space(rest.substr(end));
    if (!rest.empty() && rest.front() == ';') rest.remove_prefix(1);
  }
  if (reply.calls.empty()) return std::nullopt;
  return reply;
}

}  // namespace

ToolCallFormat tool_call_format_of(const std::string& template_source) {
  if (template_source.find(kHermesOpen) != std::string::npos) return ToolCallFormat::kHermes;
  const bool asks_for_json_calls = template_source.find("{\"name\"") != std::string::npos &&
                                   template_source.find("\"parameters\"") != std::string::npos;
  if (template_source.find(kPythonTag) != std::string::npos || asks_for_json_calls) return ToolCallFormat::kLlamaJson;
  return ToolCallFormat::kNone;
}

std::optional<ToolCallReply> parse_tool_calls(const std::string& text, ToolCallFormat format,
                                              const std::vector<std::string>& tools) {
  switch (format) {
    case ToolCallFormat::kHermes: return parse_hermes(text, tools);
    case ToolCallFormat::kLlamaJson: return parse_llama_json(text, tools);
    case ToolCallFormat::kNone: return std::nullopt;
  }
  return std::nullopt;
}

ToolCallStream::ToolCallStream(ToolCallFormat format, std::vector<std::string> tools)
    : format_(format), tools_(std::move(tools)) {}

std::string ToolCallStream::feed(const std::string& piece) {
  held_ += piece;
  if (calling_) return {};
  std::size_t keep = 0;  // the end of held_ that stays held
  if (format_ == ToolCallFormat::kHermes) {
    const std::size_t open = held_.find(kHermesOpen);
    calling_ = open != std::string::npos;
    keep = calling_ ? held_.size() - open : partial_tag_at_end(held_, kHermesOpen);
  } else if (format_ == ToolCallFormat::kLlamaJson && sent_.empty()) {
    // A Llama call is the whole reply: held while the reply so far may begin one.
    const std::string_view lead = without_leading_space(held_);
    calling_ = starts_with(lead, "{") || starts_with(lead, kPythonTag);
    const bool may_begin = lead.empty() || calling_ || starts_with(kPythonTag, lead);
    keep = may_begin ? held_.size() : 0;
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, out.size());
  sent_ += out;
  return out;
}

std::optional<ToolCallReply> ToolCallStream::finish() {
  if (held_.empty()) return std::nullopt;
  auto reply = parse_tool_calls(held_, format_, tools_);
  if (!reply) return std::nullopt;
  reply->content = only_space(sent_) ? std::nullopt : std::optional<std::string>(sent_);
  held_.clear();
  return reply;
}

}  // namespace graphed::serve
