// serve/completion_handlers.cpp — see serve/completion_handlers.h. A streamed answer is a chunked HTTP
// body written by httplib's content provider on the connection's thread after the handler returns; its
// state lives in one shared Exchange. A whole answer that is not ready within two heartbeats becomes a
// chunked body too, so that a hung-up client is noticed while it waits (JSON allows the leading spaces).
#include "graphed/serve/completion_handlers.h"

#include <atomic>
#include <ctime>
#include <iomanip>
#include <memory>
#include <random>
#include <sstream>
#include <utility>

#include "graphed/serve/api_error.h"
#include "graphed/serve/generation.h"

namespace graphed::serve {
namespace {

using json = nlohmann::ordered_json;

std::string new_id(const std::string& prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::ostringstream id;
  id << prefix << std::hex << std::setw(16) << std::setfill('0')
     << (salt ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ULL));
  return id.str();
}

uint64_t fresh_seed() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t start = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  return start + counter.fetch_add(1) * 0x9E3779B97F4A7C15ULL;
}

std::string event(const json& body) { return "data: " + body.dump() + "\n\n"; }

/// One request between its handler and httplib's content provider.
struct Exchange {
  Exchange(std::unique_ptr<Generation> generation, ResponseHeader header, bool chat, bool include_usage,
           ServerMetrics& metrics, std::shared_ptr<std::atomic<int>> open)
      : generation(std::move(generation)),
        header(std::move(header)),
        chat(chat),
        include_usage(include_usage),
        metrics(metrics),
        open(std::move(open)) {
    ++*this->open;
  }
  ~Exchange() { --*open; }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  std::unique_ptr<Generation> generation;
  ResponseHeader header;
  bool chat;
  bool include_usage;
  ServerMetrics& metrics;
  std::shared_ptr<std::atomic<int>> open;  // the handlers' count of open requests
  std::string text;                        // a whole answer's text so far
  bool role_sent = false;                  // a chat stream's first chunk
  bool settled = false;                    // counted in the metrics

  json body(const std::string& finish_reason) const {
    const Usage usage = generation->usage();
    return chat ? chat_body(header, text, finish_reason, usage) : completion_body(header, text, finish_reason, usage);
  }
  json chunk(const std::string& piece, const std::optional<std::string>& finish_reason) const {
    if (!chat) return completion_chunk(header, piece, finish_reason);
    return chat_chunk(header, finish_reason && piece.empty() ? json::object() : json{{"content", piece}},
                      finish_reason);
  }
  void settle(Outcome outcome) {
    if (settled) return;
    settled = true;
    metrics.count(outcome);
    if (outcome == Outcome::kCompleted) {
      const Usage usage = generation->usage();
      metrics.record(usage.prompt_tokens, usage.completion_tokens, generation->first_token_seconds(),
                     generation->per_output_token_seconds(), generation->duration_seconds());
    }
  }
  /// The client hung up: the request ends and its blocks go back.
  bool hung_up() {
    generation->cancel();
    settle(Outcome::kCancelled);
    return false;
  }
};

/// One call of a stream's content provider: writes what came within a heartbeat. False: the client left.
bool pump_stream(Exchange& exchange, httplib::DataSink& sink, std::chrono::milliseconds heartbeat) {
  const auto write = [&](const std::string& data) { return sink.write(data.data(), data.size()); };
  if (exchange.chat && !exchange.role_sent) {
    exchange.role_sent = true;
    if (!write(event(chat_chunk(exchange.header, {{"role", "assistant"}, {"content", ""}}, std::nullopt)))) {
      return exchange.hung_up();
    }
  }
  try {
    const auto piece = exchange.generation->next(heartbeat);
    if (!piece) return write(": keep-alive\n\n") || exchange.hung_up();
    if (!piece->text.empty() && !write(event(exchange.chunk(piece->text, std::nullopt)))) return exchange.hung_up();
    if (!piece->finish_reason) return true;
    std::string tail = event(exchange.chunk("", piece->finish_reason));
    if (exchange.include_usage) {
      tail += event(usage_chunk(exchange.header, exchange.chat ? "chat.completion.chunk" : "text_completion",
                                exchange.generation->usage()));
    }
    if (!write(tail + "data: [DONE]\n\n")) return exchange.hung_up();
    exchange.settle(Outcome::kCompleted);
  } catch (const ApiError& error) {
    exchange.settle(outcome_of_status(error.status()));
    write(event(error.body()) + "data: [DONE]\n\n");
  }
  sink.done();
  return true;
}

/// One call of a late whole answer's provider: a space while it waits, the body once it is done.
bool pump_whole(Exchange& exchange, httplib::DataSink& sink, std::chrono::milliseconds heartbeat) {
  const auto write = [&](const std::string& data) { return sink.write(data.data(), data.size()); };
  try {
    const auto piece = exchange.generation->next(heartbeat);
    if (!piece) return write(" ") || exchange.hung_up();
    exchange.text += piece->text;
    if (!piece->finish_reason) return true;
    if (!write(exchange.body(*piece->finish_reason).dump())) return exchange.hung_up();
    exchange.settle(Outcome::kCompleted);
  } catch (const ApiError& error) {  // the status went out already: the body says what happened
    exchange.settle(outcome_of_status(error.status()));
    write(error.body().dump());
  }
  sink.done();
  return true;
}

}  // namespace

CompletionHandlers::CompletionHandlers(EngineLoop& loop, ServerMetrics& metrics, const ServedModel& model,
                                       std::chrono::milliseconds heartbeat)
    : loop_(loop), metrics_(metrics), model_(model), heartbeat_(heartbeat) {}

void CompletionHandlers::check_model(const std::string& model) const {
  if (model.empty() || model == model_.id) return;
  throw ApiError(
      404, "not_found_error",
      "the model '" + model + "' is not served here; send \"model\": \"" + model_.id + "\" (GET /v1/models lists it)",
      "model");
}

GenerationPlan CompletionHandlers::plan(std::vector<int64_t> prompt, const GenerationFields& fields, bool chat) const {
  GenerationPlan plan;
  const auto length = static_cast<int64_t>(prompt.size());
  if (length == 0)
    throw invalid_request("the prompt is empty; send at least one token of text", chat ? "messages" : "prompt");
  // OpenAI's defaults: 16 tokens for a completion; a chat may use whatever the context leaves.
  plan.options.max_new_tokens = fields.max_tokens.value_or(chat ? std::max<int64_t>(1, model_.context - length) : 16);
  plan.options.sampling.temperature = fields.temperature;
  plan.options.sampling.top_k = fields.top_k;
  plan.options.sampling.top_p = fields.top_p;
  plan.options.sampling.seed = fields.seed.value_or(fresh_seed());
  if (!fields.ignore_eos) plan.options.stop_tokens = model_.end_tokens;
  plan.options.stop_tokens.insert(plan.options.stop_tokens.end(), fields.stop_ids.begin(), fields.stop_ids.end());
  plan.stop_strings = fields.stop_strings;
  if (const auto reason = loop_.rejection(prompt, plan.options)) {
    throw invalid_request(*reason, fields.max_tokens ? "max_tokens" : (chat ? "messages" : "prompt"));
  }
  plan.prompt = std::move(prompt);
  return plan;
}

void CompletionHandlers::run(bool chat, std::vector<int64_t> prompt, const GenerationFields& fields,
                             httplib::Response& response) {
  const auto arrival = Clock::now();
  ResponseHeader header{new_id(chat ? "chatcmpl-" : "cmpl-"), model_.id, static_cast<int64_t>(std::time(nullptr))};
  auto generation =
      std::make_unique<Generation>(loop_, *model_.tokenizer, plan(std::move(prompt), fields, chat), arrival);
  auto exchange =
      std::make_shared<Exchange>(std::move(generation), header, chat, fields.include_usage, metrics_, open_);
  const auto release = [exchange](bool) {
    if (!exchange->settled) exchange->hung_up();
  };
  const auto heartbeat = heartbeat_;
  if (fields.stream) {
    response.set_header("Cache-Control", "no-cache");
    response.set_chunked_content_provider(
        "text/event-stream",
        [exchange, heartbeat](size_t, httplib::DataSink& sink) { return pump_stream(*exchange, sink, heartbeat); },
        release);
    return;
  }
  // A whole answer: wait up to two heartbeats here, so that most answers (and their errors) go out with
  // their own status and length.
  const auto deadline = arrival + 2 * heartbeat_;
  while (Clock::now() < deadline) {
    const auto piece = exchange->generation->next(heartbeat_);  // ApiError propagates: nothing sent yet
    if (!piece) continue;
    exchange->text += piece->text;
    if (piece->finish_reason) {
      response.set_content(exchange->body(*piece->finish_reason).dump(), "application/json");
      exchange->settle(Outcome::kCompleted);
      return;
    }
  }
  response.set_chunked_content_provider(
      "application/json",
      [exchange, heartbeat](size_t, httplib::DataSink& sink) { return pump_whole(*exchange, sink, heartbeat); },
      release);
}

void CompletionHandlers::completions(const httplib::Request& request, httplib::Response& response) {
  const CompletionRequest parsed = parse_completion_request(parse_body(request.body));
  check_model(parsed.model);
  std::vector<int64_t> prompt = parsed.prompt_ids;
  if (parsed.prompt_text) prompt = model_.tokenizer->encode(*parsed.prompt_text, /*add_special_tokens=*/true);
  run(false, std::move(prompt), parsed.generation, response);
}

void CompletionHandlers::chat(const httplib::Request& request, httplib::Response& response) {
  const ChatRequest parsed = parse_chat_request(parse_body(request.body));
  check_model(parsed.model);
  if (model_.chat == nullptr) {
    throw invalid_request("the model '" + model_.id +
                              "' has no chat template, so it cannot take chat messages; use "
                              "POST /v1/completions with a prompt, or start the server with --chat-template FILE",
                          "messages");
  }
  const std::string text =
      model_.chat->render(parsed.messages, parsed.tools, parsed.add_generation_prompt, parsed.template_kwargs);
  // The template writes the special tokens (bos) itself, as transformers' apply_chat_template does.
  run(true, model_.tokenizer->encode(text, /*add_special_tokens=*/false), parsed.generation, response);
}

}  // namespace graphed::serve
