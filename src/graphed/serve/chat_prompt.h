// serve/chat_prompt.h — a chat turned into the model's prompt text by the model's own chat template
// (Hugging Face's chat_template.jinja, or tokenizer_config.json's "chat_template"), rendered by
// graphed's Jinja subset with what transformers' apply_chat_template passes: messages, tools,
// add_generation_prompt, bos_token, eos_token and the request's chat_template_kwargs.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "graphed/serve/tool_calls.h"

namespace graphed::jinja {
class Template;
}  // namespace graphed::jinja

namespace graphed::serve {

class ChatPrompt {
 public:
  /// The template of a Hugging Face folder, or nullopt when it has none. Throws DataError naming the
  /// file when the template is unreadable or does not parse.
  static std::optional<ChatPrompt> from_folder(const std::string& folder);
  /// A template file given on the command line (--chat-template); bos and eos tokens from `folder` when
  /// it is not empty. Throws DataError naming the file.
  static ChatPrompt from_file(const std::string& path, const std::string& folder);

  ChatPrompt(const std::string& source, std::string origin, std::string bos_token, std::string eos_token);
  ~ChatPrompt();
  ChatPrompt(ChatPrompt&&) noexcept;
  ChatPrompt& operator=(ChatPrompt&&) noexcept;

  /// The prompt text. Throws ApiError 400 when the template refuses the chat (raise_exception, say),
  /// with the template's own message.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const nlohmann::ordered_json& template_kwargs) const;
  /// Where the template came from ("chat_template.jinja in DIR").
  const std::string& origin() const { return origin_; }
  /// The tool-call format the template teaches (serve/tool_calls.h), read from its source.
  ToolCallFormat tool_call_format() const { return tool_call_format_; }

 private:
  std::unique_ptr<jinja::Template> template_;
  std::string origin_;
  std::string bos_token_;
  std::string eos_token_;
  ToolCallFormat tool_call_format_ = ToolCallFormat::kNone;
};

}  // namespace graphed::serve
