// serve/openai_protocol.cpp — see serve/openai_protocol.h. Each field is read by one small reader that
// knows its type and range; the first bad field ends the request with a message that names it, says what
// came, and what to send instead.
#include "graphed/serve/openai_protocol.h"

#include <algorithm>
#include <limits>

#include "graphed/serve/api_error.h"
#include "graphed/serve/json_fields.h"
#include "graphed/serve/response_format.h"

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

/// Fields graphed does not have: refused unless they hold their no-op value.
void refuse_unsupported(const json& body) {
  if (const auto best = integer_in(body, "best_of", 1, 128); best && *best != 1) {
    throw invalid_request(
        "'best_of' is not supported (it would draw best_of choices and return the n likeliest); "
        "leave it out, and send n for several choices",
        "best_of");
  }
  if (boolean_in(body, "echo", false))
    throw invalid_request("'echo' is not supported; leave it out and prepend the prompt yourself", "echo");
  const json* suffix = field_of(body, "suffix");
  if (suffix != nullptr && !(suffix->is_string() && suffix->get<std::string>().empty())) {
    throw invalid_request("'suffix' (insertion) is not supported; leave it out", "suffix");
  }
}

void read_stop(const json& body, GenerationFields& fields) {
  const json* stop = field_of(body, "stop");
  if (stop != nullptr) {
    const std::string wanted = "a string, or an array of up to 16 strings (or token ids)";
    if (stop->is_string()) {
      fields.stop_strings.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= 16) {
      for (const auto& item : *stop) {
        if (item.is_string()) {
          fields.stop_strings.push_back(item.get<std::string>());
        } else if (item.is_number_integer() && item.get<int64_t>() >= 0) {
          fields.stop_ids.push_back(item.get<int64_t>());
        } else {
          wrong_type("stop", item, wanted);
        }
      }
    } else {
      wrong_type("stop", *stop, wanted);
    }
    for (const auto& text : fields.stop_strings) {
      if (text.empty()) throw invalid_request("'stop' holds an empty string; send non-empty stop strings", "stop");
    }
  }
  if (const json* ids = field_of(body, "stop_token_ids"); ids != nullptr) {
    if (!ids->is_array()) wrong_type("stop_token_ids", *ids, "an array of token ids");
    for (const auto& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0)
        wrong_type("stop_token_ids", id, "an array of token ids (integers >= 0)");
      fields.stop_ids.push_back(id.get<int64_t>());
    }
  }
}

GenerationFields read_generation(const json& body, const std::string& max_tokens_name, LogprobsForm logprobs) {
  refuse_unsupported(body);
  GenerationFields fields;
  constexpr int64_t kLargest = std::numeric_limits<int32_t>::max();
  fields.max_tokens = integer_in(body, max_tokens_name, 1, kLargest);
  if (!fields.max_tokens) fields.max_tokens = integer_in(body, "max_tokens", 1, kLargest);
  fields.temperature = number_in(body, "temperature", 1.0, 0.0, 2.0);
  fields.top_p = number_in(body, "top_p", 1.0, 0.0, 1.0);
  if (fields.top_p == 0.0) throw invalid_request("'top_p' is 0; send a number above 0 and up to 1", "top_p");
  const auto top_k = integer_in(body, "top_k", -1, kLargest);
  fields.top_k = top_k && *top_k > 0 ? *top_k : 0;
  if (const json* seed = field_of(body, "seed"); seed != nullptr) {
    if (!seed->is_number_integer()) wrong_type("seed", *seed, "an integer");
    fields.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
  }
  read_stop(body, fields);
  fields.choices = integer_in(body, "n", 1, 128).value_or(1);
  fields.ignore_eos = boolean_in(body, "ignore_eos", false);
  fields.sampling = read_sampling_fields(body, logprobs);
  if (fields.max_tokens && fields.sampling.min_tokens > *fields.max_tokens) {
    throw invalid_request("'min_tokens' is " + std::to_string(fields.sampling.min_tokens) +
                              ", more than the request's max_tokens (" + std::to_string(*fields.max_tokens) +
                              "); send at most that many",
                          "min_tokens");
  }
  OutputFormat format = read_response_format(body);
  fields.grammar = std::move(format.grammar);
  fields.grammar_param = std::move(format.field);
  fields.stream = boolean_in(body, "stream", false);
  if (const json* options = field_of(body, "stream_options"); options != nullptr) {
    if (!options->is_object()) wrong_type("stream_options", *options, "an object such as {\"include_usage\": true}");
    fields.include_usage = boolean_in(*options, "include_usage", false);
  }
  return fields;
}

std::string model_of(const json& body) {
  const json* model = field_of(body, "model");
  if (model == nullptr) return "";
  if (!model->is_string()) wrong_type("model", *model, "the model's id as a string (GET /v1/models lists it)");
  return model->get<std::string>();
}

/// Token ids: an array of integers.
std::vector<int64_t> prompt_ids(const json& items, const std::string& field) {
  std::vector<int64_t> ids;
  for (const auto& item : items) {
    if (!item.is_number_integer()) wrong_type(field, item, "a token id (an integer)");
    ids.push_back(item.get<int64_t>());
  }
  return ids;
}

/// The prompts: a string, token ids, or an array of either kind, one prompt each.
void read_prompts(const json& body, CompletionRequest& request) {
  const json* prompt = field_of(body, "prompt");
  const std::string wanted = "a string, an array of token ids, or an array of several of either";
  if (prompt == nullptr) throw invalid_request("'prompt' is missing; send the text to continue as a string", "prompt");
  if (prompt->is_string()) {
    request.prompts.push_back({prompt->get<std::string>(), {}});
    return;
  }
  if (!prompt->is_array() || prompt->empty()) wrong_type("prompt", *prompt, wanted);
  if (!prompt->front().is_string() && !prompt->front().is_array()) {  // one prompt of ids
    request.prompts.push_back({std::nullopt, prompt_ids(*prompt, "prompt")});
    return;
  }
  for (std::size_t i = 0; i < prompt->size(); ++i) {
    const json& item = (*prompt)[i];
    const std::string field = "prompt[" + std::to_string(i) + "]";
    if (item.is_string()) {
      request.prompts.push_back({item.get<std::string>(), {}});
    } else if (item.is_array()) {
      request.prompts.push_back({std::nullopt, prompt_ids(item, field)});
    } else {
      wrong_type(field, item, "a string or an array of token ids, as the prompts before it");
    }
  }
}

/// A message's content as one string: text parts are joined; other parts are refused.
json content_of(const json& message, std::size_t index) {
  const std::string field = "messages[" + std::to_string(index) + "].content";
  const auto found = message.find("content");
  if (found == message.end() || found->is_null()) return nullptr;
  if (found->is_string()) return *found;
  if (!found->is_array())
    wrong_type(field, *found, "a string or an array of {\"type\": \"text\", \"text\": ...} parts");
  std::string text;
  for (const auto& part : *found) {
    const bool text_part = part.is_object() && part.contains("type") && part["type"] == "text" &&
                           part.contains("text") && part["text"].is_string();
    if (!text_part) {
      throw invalid_request("'" + field +
                                "' holds a part that is not text; graphed serves text models: send "
                                "{\"type\": \"text\", \"text\": ...} parts only",
                            field);
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

/// An assistant message's earlier tool calls with their `arguments` as objects: OpenAI's clients send them as JSON
/// text, and templates such as Llama 3.1's write them with `tojson`, which would quote the text again (vLLM parses
/// them too); empty text is no arguments, {}. Text that does not hold an object stays as sent.
void parse_call_arguments(json& message) {
  json* calls = message.contains("tool_calls") ? &message["tool_calls"] : nullptr;
  if (calls == nullptr || !calls->is_array()) return;
  for (json& call : *calls) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
    json& function = call["function"];
    if (!function.contains("arguments") || !function["arguments"].is_string()) continue;
    const std::string text = function["arguments"].get<std::string>();
    json parsed = text.empty() ? json::object() : json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) function["arguments"] = std::move(parsed);  // no arguments ("") are an empty object
  }
}

json checked_messages(const json& body) {
  const json* messages = field_of(body, "messages");
  if (messages == nullptr)
    throw invalid_request("'messages' is missing; send an array of {\"role\", \"content\"} objects", "messages");
  if (!messages->is_array() || messages->empty()) {
    wrong_type("messages", *messages, "a non-empty array of {\"role\", \"content\"} objects");
  }
  json result = json::array();
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!message.is_object()) wrong_type(field, message, "an object with \"role\" and \"content\"");
    const std::string role =
        message.contains("role") && message["role"].is_string() ? message["role"].get<std::string>() : "";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer") {
      throw invalid_request("'" + field + ".role' is " +
                                (message.contains("role") ? message["role"].dump() : "missing") +
                                "; send one of system, developer, user, assistant, tool",
                            field + ".role");
    }
    json checked = message;
    checked["content"] = content_of(message, i);
    if (checked["content"].is_null() && role != "assistant") {
      throw invalid_request("'" + field + ".content' is missing; send the " + role + " message's text",
                            field + ".content");
    }
    if (role == "assistant") parse_call_arguments(checked);
    result.push_back(std::move(checked));
  }
  return result;
}

/// A body of `object` with one choice: index, finish_reason (null while the text goes on), then `field`
/// (text, message or delta) and logprobs (null unless asked for).
json choice(int64_t index, const std::optional<std::string>& finish_reason, const std::string& field, json value,
            json logprobs) {
  json entry{{"index", index}};
  entry["finish_reason"] = finish_reason ? json(*finish_reason) : json(nullptr);
  entry[field] = std::move(value);
  entry["logprobs"] = std::move(logprobs);
  return entry;
}

json with_choices(const ResponseHeader& header, const std::string& object, json choices) {
  json body{{"id", header.id}, {"object", object}, {"created", header.created}, {"model", header.model}};
  body["choices"] = std::move(choices);
  return body;
}

}  // namespace

json parse_body(const std::string& text) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    throw invalid_request("the request body is not valid JSON; send a JSON object (Content-Type: application/json)");
  }
  if (!body.is_object()) throw invalid_request("the request body is " + kind_of(body) + "; send a JSON object");
  return body;
}

CompletionRequest parse_completion_request(const json& body) {
  CompletionRequest request;
  request.model = model_of(body);
  read_prompts(body, request);
  request.generation = read_generation(body, "max_tokens", LogprobsForm::kCompletion);
  return request;
}

namespace {

/// The names of the functions in a chat's tools (those of type "function" with a string name).
std::vector<std::string> function_names(const json& tools) {
  std::vector<std::string> names;
  if (!tools.is_array()) return names;
  for (const json& tool : tools) {
    const json* function = tool.is_object() ? field_of(tool, "function") : nullptr;
    const json* name = function != nullptr && function->is_object() ? field_of(*function, "name") : nullptr;
    if (name != nullptr && name->is_string()) names.push_back(name->get<std::string>());
  }
  return names;
}

/// The function a tool_choice object names: {"type": "function", "function": {"name": ...}}.
std::string named_function(const json& choice) {
  const std::string wanted =
      "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  const json* type = field_of(choice, "type");
  const json* function = field_of(choice, "function");
  const json* name = function != nullptr && function->is_object() ? field_of(*function, "name") : nullptr;
  if (type == nullptr || *type != "function" || name == nullptr || !name->is_string()) {
    wrong_type("tool_choice", choice, wanted);
  }
  return name->get<std::string>();
}

/// tool_choice and the functions it lets the reply call (ChatRequest::callable); after the tools are read.
void read_tool_choice(const json& body, ChatRequest& request) {
  const std::vector<std::string> names = function_names(request.tools);
  request.callable = names;
  const json* choice = field_of(body, "tool_choice");
  if (choice == nullptr) return;
  const std::string wanted =
      "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (choice->is_string() && *choice == "auto") return;
  if (choice->is_string() && *choice == "none") {
    request.tool_choice = ToolChoice::kNone;
    request.callable.clear();
    return;
  }
  if (choice->is_string() && *choice == "required") {
    request.tool_choice = ToolChoice::kRequired;
  } else if (choice->is_object()) {
    request.tool_choice = ToolChoice::kFunction;
    const std::string name = named_function(*choice);
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::string known;
      for (const std::string& each : names) known += (known.empty() ? "" : ", ") + each;
      throw invalid_request("'tool_choice' names the function '" + name + "', which 'tools' does not define; send " +
                                (names.empty() ? std::string("tools that define it") : "one of: " + known),
                            "tool_choice");
    }
    request.callable = {name};
  } else if (choice->is_string()) {
    throw invalid_request("'tool_choice' is \"" + choice->get<std::string>() + "\"; send " + wanted, "tool_choice");
  } else {
    wrong_type("tool_choice", *choice, wanted);
  }
  if (names.empty()) {
    throw invalid_request(
        "'tool_choice' requires a call, but the request has no tools; send the functions in "
        "'tools', or tool_choice \"auto\"",
        "tool_choice");
  }
}

}  // namespace

ChatRequest parse_chat_request(const json& body) {
  ChatRequest request;
  request.model = model_of(body);
  request.messages = checked_messages(body);
  if (const json* tools = field_of(body, "tools"); tools != nullptr) {
    if (!tools->is_array())
      wrong_type("tools", *tools, "an array of {\"type\": \"function\", \"function\": {...}} objects");
    if (!tools->empty()) request.tools = *tools;
  }
  read_tool_choice(body, request);
  request.parallel_tool_calls = boolean_in(body, "parallel_tool_calls", true);
  if (const json* kwargs = field_of(body, "chat_template_kwargs"); kwargs != nullptr) {
    if (!kwargs->is_object())
      wrong_type("chat_template_kwargs", *kwargs, "an object such as {\"enable_thinking\": false}");
    request.template_kwargs = *kwargs;
  }
  request.add_generation_prompt = boolean_in(body, "add_generation_prompt", true);
  request.generation = read_generation(body, "max_completion_tokens", LogprobsForm::kChat);
  if (request.tool_choice == ToolChoice::kRequired || request.tool_choice == ToolChoice::kFunction) {
    if (request.generation.grammar) {
      const std::string field = request.generation.grammar_param;
      throw invalid_request(
          "'" + field + "' and a 'tool_choice' that requires a call both constrain the reply; send one of them", field);
    }
  }
  return request;
}

json Usage::to_json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json completion_body(const ResponseHeader& header, const std::vector<ChoiceText>& choices, const Usage& usage) {
  json entries = json::array();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    entries.push_back(
        choice(static_cast<int64_t>(i), choices[i].finish_reason, "text", choices[i].text, choices[i].logprobs));
  }
  json body = with_choices(header, "text_completion", std::move(entries));
  body["usage"] = usage.to_json();
  return body;
}

json completion_chunk(const ResponseHeader& header, int64_t index, const std::string& text,
                      const std::optional<std::string>& finish_reason, const json& logprobs) {
  return with_choices(header, "text_completion", json::array({choice(index, finish_reason, "text", text, logprobs)}));
}

namespace {

/// OpenAI's tool_calls array; `indexed` for a stream's delta, whose calls carry their index.
json tool_calls_json(const std::vector<ToolCall>& calls, bool indexed) {
  json array = json::array();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    json call = json::object();
    if (indexed) call["index"] = i;
    call["id"] = calls[i].id;
    call["type"] = "function";
    call["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    array.push_back(std::move(call));
  }
  return array;
}

}  // namespace

json chat_body(const ResponseHeader& header, const std::vector<ChoiceText>& choices, const Usage& usage) {
  json entries = json::array();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const ChoiceText& reply = choices[i];
    json message{{"role", "assistant"}, {"content", reply.text}};
    if (reply.tool_calls) {
      message["content"] = reply.tool_calls->content ? json(*reply.tool_calls->content) : json(nullptr);
      message["tool_calls"] = tool_calls_json(reply.tool_calls->calls, false);
    }
    entries.push_back(
        choice(static_cast<int64_t>(i), reply.finish_reason, "message", std::move(message), reply.logprobs));
  }
  json body = with_choices(header, "chat.completion", std::move(entries));
  body["usage"] = usage.to_json();
  return body;
}

json chat_tool_calls_chunk(const ResponseHeader& header, int64_t index, const std::vector<ToolCall>& calls,
                           const json& logprobs) {
  return chat_chunk(header, index, {{"tool_calls", tool_calls_json(calls, true)}}, std::nullopt, logprobs);
}

json chat_chunk(const ResponseHeader& header, int64_t index, const json& delta,
                const std::optional<std::string>& finish_reason, const json& logprobs) {
  return with_choices(header, "chat.completion.chunk",
                      json::array({choice(index, finish_reason, "delta", delta, logprobs)}));
}

json usage_chunk(const ResponseHeader& header, const std::string& object, const Usage& usage) {
  json body{{"id", header.id}, {"object", object}, {"created", header.created}, {"model", header.model}};
  body["choices"] = json::array();
  body["usage"] = usage.to_json();
  return body;
}

}  // namespace graphed::serve
