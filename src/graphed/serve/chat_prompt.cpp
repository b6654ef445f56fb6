// serve/chat_prompt.cpp — see serve/chat_prompt.h.
#include "graphed/serve/chat_prompt.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "graphed/jinja/template.h"
#include "graphed/serve/api_error.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::serve {
namespace {

using nlohmann::json;

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// tokenizer_config.json's token field: a string, {"content": ...}, or absent.
std::string token_text(const json& config, const char* name) {
  const auto found = config.find(name);
  if (found == config.end()) return "";
  if (found->is_string()) return found->get<std::string>();
  if (found->is_object() && found->contains("content") && (*found)["content"].is_string()) {
    return (*found)["content"].get<std::string>();
  }
  return "";
}

json read_tokenizer_config(const std::string& folder) {
  const std::string path = join_path(folder, "tokenizer_config.json");
  const auto text = read_text(path);
  if (!text) return json::object();
  json config = json::parse(*text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    throw DataError(path + " is not a JSON object; fix: restore the file from the model's repository");
  }
  return config;
}

/// tokenizer_config.json's chat_template: a string, or a list of {"name", "template"} ("default" wins).
std::optional<std::string> config_template(const json& config, const std::string& path) {
  const auto found = config.find("chat_template");
  if (found == config.end() || found->is_null()) return std::nullopt;
  if (found->is_string()) return found->get<std::string>();
  if (found->is_array()) {
    for (const auto& entry : *found) {
      if (entry.is_object() && entry.contains("name") && entry["name"] == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
  }
  throw DataError(path +
                  ": chat_template is neither a string nor a list holding a \"default\" template; fix: "
                  "give the template with --chat-template FILE");
}

}  // namespace

std::optional<ChatPrompt> ChatPrompt::from_folder(const std::string& folder) {
  const json config = read_tokenizer_config(folder);
  const std::string file = join_path(folder, "chat_template.jinja");
  if (const auto source = read_text(file)) {
    return ChatPrompt(*source, "chat_template.jinja in " + folder, token_text(config, "bos_token"),
                      token_text(config, "eos_token"));
  }
  const std::string config_path = join_path(folder, "tokenizer_config.json");
  const auto source = config_template(config, config_path);
  if (!source) return std::nullopt;
  return ChatPrompt(*source, config_path, token_text(config, "bos_token"), token_text(config, "eos_token"));
}

ChatPrompt ChatPrompt::from_file(const std::string& path, const std::string& folder) {
  const auto source = read_text(path);
  if (!source) throw DataError("--chat-template " + path + " cannot be read; fix: give a readable Jinja template file");
  const json config = folder.empty() ? json::object() : read_tokenizer_config(folder);
  return ChatPrompt(*source, path, token_text(config, "bos_token"), token_text(config, "eos_token"));
}

ChatPrompt::ChatPrompt(const std::string& source, std::string origin, std::string bos_token, std::string eos_token)
    : origin_(std::move(origin)),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      tool_call_format_(tool_call_format_of(source)) {
  try {
    template_ = std::make_unique<jinja::Template>(source);
  } catch (const jinja::TemplateError& error) {
    throw DataError("the chat template of " + origin_ + " does not parse at line " + std::to_string(error.line()) +
                    ", column " + std::to_string(error.column()) + ": " + error.problem() +
                    "; fix: correct it, or give another with --chat-template FILE");
  }
}

ChatPrompt::~ChatPrompt() = default;
ChatPrompt::ChatPrompt(ChatPrompt&&) noexcept = default;
ChatPrompt& ChatPrompt::operator=(ChatPrompt&&) noexcept = default;

std::string ChatPrompt::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                               bool add_generation_prompt, const nlohmann::ordered_json& template_kwargs) const {
  nlohmann::ordered_json context = template_kwargs.is_object() ? template_kwargs : nlohmann::ordered_json::object();
  context["messages"] = messages;
  if (!tools.is_null()) context["tools"] = tools;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_token_;
  context["eos_token"] = eos_token_;
  try {
    return template_->render(context);
  } catch (const jinja::TemplateError& error) {
    if (error.raised_by_template()) {
      throw invalid_request("the model's chat template refused the messages: " + error.problem() +
                                "; send messages in the form this template accepts (its own words are above)",
                            "messages");
    }
    throw invalid_request("the model's chat template could not render these messages (line " +
                              std::to_string(error.line()) + " of the template: " + error.problem() +
                              "); send the fields the model's template expects",
                          "messages");
  }
}

}  // namespace graphed::serve
