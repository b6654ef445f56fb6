// serve/request_kind.cpp — see serve/request_kind.h. The two kinds are thin: each forwards to the body and
// chunk builders of serve/openai_protocol.h that give its endpoint's shapes.
#include "graphed/serve/request_kind.h"

#include <algorithm>

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

class CompletionKind final : public RequestKind {
 public:
  std::string id_prefix() const override { return "cmpl-"; }
  std::string prompt_param() const override { return "prompt"; }
  int64_t default_max_tokens(int64_t, int64_t) const override { return 16; }
  json body(const ResponseHeader& header, const std::vector<ChoiceText>& choices, const Usage& usage) const override {
    return completion_body(header, choices, usage);
  }
  std::vector<json> opening_chunks(const ResponseHeader&, int64_t) const override { return {}; }
  json chunk(const ResponseHeader& header, int64_t index, const std::string& piece,
             const std::optional<std::string>& finish_reason, const json& logprobs) const override {
    return completion_chunk(header, index, piece, finish_reason, logprobs);
  }
  json logprobs(const std::vector<TokenLogprob>& tokens, const VocabularyTable& table,
                int64_t& text_offset) const override {
    return completion_logprobs(tokens, table, text_offset);
  }
  std::string chunk_object() const override { return "text_completion"; }
};

class ChatKind final : public RequestKind {
 public:
  std::string id_prefix() const override { return "chatcmpl-"; }
  std::string prompt_param() const override { return "messages"; }
  int64_t default_max_tokens(int64_t prompt_length, int64_t context) const override {
    return std::max<int64_t>(1, context - prompt_length);
  }
  /// A chat has one prompt, so a choice per draw (n).
  json body(const ResponseHeader& header, const std::vector<ChoiceText>& choices, const Usage& usage) const override {
    return chat_body(header, choices, usage);
  }
  std::vector<json> opening_chunks(const ResponseHeader& header, int64_t index) const override {
    return {chat_chunk(header, index, {{"role", "assistant"}, {"content", ""}}, std::nullopt)};
  }
  /// The choice's delta: {"content": piece}, or {} for the end.
  json chunk(const ResponseHeader& header, int64_t index, const std::string& piece,
             const std::optional<std::string>& finish_reason, const json& logprobs) const override {
    return chat_chunk(header, index, finish_reason && piece.empty() ? json::object() : json{{"content", piece}},
                      finish_reason, logprobs);
  }
  json logprobs(const std::vector<TokenLogprob>& tokens, const VocabularyTable& table, int64_t&) const override {
    return chat_logprobs(tokens, table);
  }
  std::string chunk_object() const override { return "chat.completion.chunk"; }
};

}  // namespace

const RequestKind& completion_kind() {
  static const CompletionKind kind;
  return kind;
}

const RequestKind& chat_kind() {
  static const ChatKind kind;
  return kind;
}

}  // namespace graphed::serve
