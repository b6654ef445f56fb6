// serve/completion_handlers.cpp — see serve/completion_handlers.h. A streamed answer is a chunked HTTP
// body written by httplib's content provider on the connection's thread after the handler returns; its
// state lives in one shared Exchange, and several prompts stream one after another (they run at once; the
// later ones' tokens wait in their streams). A whole answer is waited for in the handler, so that nothing
// (not even the status) goes out before it is known to have succeeded.
#include "graphed/serve/completion_handlers.h"

#include <algorithm>
#include <atomic>
#include <ctime>
#include <iomanip>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <utility>

#include "graphed/serve/api_error.h"
#include "graphed/serve/client_connection.h"
#include "graphed/serve/generation.h"
#include "graphed/serve/request_kind.h"
#include "graphed/serve/structured_output.h"
#include "graphed/serve/tool_call_grammar.h"
#include "graphed/util/logging.h"

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

/// One prompt's generation and what it wrote so far.
struct Choice {
  std::unique_ptr<Generation> generation;
  ToolCallStream reply;                      // a stream's text: content out at once, a tool call's start held
  std::string text;                          // a whole answer's text so far
  std::optional<std::string> finish_reason;  // set once it ended
  std::vector<TokenLogprob> logprobs;        // a whole answer's, or those a stream has not sent yet
  int64_t text_offset = 0;                   // characters of text a stream's logprobs have covered
};

/// Calls as the server hands them out: named "call_...", only the first without parallel calls.
ToolCallReply named(ToolCallReply reply, bool parallel) {
  if (!parallel && reply.calls.size() > 1) reply.calls.resize(1);
  for (auto& call : reply.calls) call.id = new_id("call_");
  return reply;
}

/// One request between its handler and httplib's content provider.
struct Exchange {
  Exchange(std::vector<Choice> choices, ResponseHeader header, const RequestKind& kind, ReplyReading reading,
           bool include_usage, std::shared_ptr<const VocabularyTable> table, ServerMetrics& metrics,
           std::shared_ptr<std::atomic<int>> open)
      : choices(std::move(choices)),
        header(std::move(header)),
        kind(kind),
        reading(std::move(reading)),
        include_usage(include_usage),
        table(std::move(table)),
        metrics(metrics),
        open(std::move(open)) {
    ++*this->open;
  }
  ~Exchange() { --*open; }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  std::vector<Choice> choices;
  ResponseHeader header;
  const RequestKind& kind;  // lives as long as the program
  ReplyReading reading;
  bool include_usage;
  std::shared_ptr<const VocabularyTable> table;  // token texts, when the request asked for log probabilities
  ServerMetrics& metrics;
  std::shared_ptr<std::atomic<int>> open;  // the handlers' count of open requests
  std::size_t streaming = 0;               // the choice a stream writes now (each in turn; all run at once)
  std::size_t opened = 0;                  // the choices whose opening chunks are sent
  bool settled = false;                    // counted in the metrics

  Usage usage() const {
    Usage total;
    for (const auto& choice : choices) {
      const Usage one = choice.generation->usage();
      total.prompt_tokens += one.prompt_tokens;
      total.completion_tokens += one.completion_tokens;
    }
    return total;
  }
  json body() const {
    std::vector<ChoiceText> texts;
    for (const auto& choice : choices) {
      ChoiceText text{choice.text, *choice.finish_reason, std::nullopt};
      if (auto calls = parse_tool_calls(choice.text, reading.format, reading.callable)) {
        text.tool_calls = named(std::move(*calls), reading.parallel);
        text.finish_reason = "tool_calls";
      }
      int64_t text_offset = 0;
      if (table) text.logprobs = kind.logprobs(choice.logprobs, *table, text_offset);
      texts.push_back(std::move(text));
    }
    return kind.body(header, texts, usage());
  }
  /// The events that end the choice streaming now: what its reply held back (content, or its tool calls), then
  /// the chunk with its finish reason.
  std::string end_events(Choice& choice) const {
    std::string events;
    if (auto calls = choice.reply.finish()) {
      choice.finish_reason = "tool_calls";
      events += event(chat_tool_calls_chunk(header, static_cast<int64_t>(streaming),
                                            named(std::move(*calls), reading.parallel).calls, take_logprobs(choice)));
    } else if (!choice.reply.held().empty()) {
      events += event(chunk(choice.reply.held(), std::nullopt, take_logprobs(choice)));
    }
    const json rest = choice.logprobs.empty() ? json(nullptr) : take_logprobs(choice);  // an end token's
    return events + event(chunk("", choice.finish_reason, rest));
  }
  /// A chunk of the choice streaming now.
  json chunk(const std::string& piece, const std::optional<std::string>& finish_reason,
             const json& logprobs = nullptr) const {
    return kind.chunk(header, static_cast<int64_t>(streaming), piece, finish_reason, logprobs);
  }
  /// The log probabilities of the choice's tokens a stream has not sent yet, in the kind's shape (null when the
  /// request asked for none); they count as sent.
  json take_logprobs(Choice& choice) const {
    if (!table) return nullptr;
    json logprobs = kind.logprobs(choice.logprobs, *table, choice.text_offset);
    choice.logprobs.clear();
    return logprobs;
  }
  /// Counts the request's outcome once; a completed one's tokens and the first prompt's timings.
  void settle(Outcome outcome) {
    if (settled) return;
    settled = true;
    metrics.count(outcome);
    if (outcome == Outcome::kCompleted) record_timings();
  }
  /// A completed request's tokens and timings: the earliest first token, the latest end, and the time per token
  /// of its longest answer.
  void record_timings() {
    const Usage total = usage();
    double first_token = 0, per_token = 0, duration = 0;
    int64_t longest = -1;
    for (const auto& choice : choices) {
      const Generation& generation = *choice.generation;
      const int64_t tokens = generation.usage().completion_tokens;
      if (tokens > 0 && (first_token == 0 || generation.first_token_seconds() < first_token)) {
        first_token = generation.first_token_seconds();
      }
      duration = std::max(duration, generation.duration_seconds());
      if (tokens > longest) {
        longest = tokens;
        per_token = generation.per_output_token_seconds();
      }
    }
    metrics.record(total.prompt_tokens, total.completion_tokens, first_token, per_token, duration);
  }
  /// The client hung up: the requests end and their blocks go back.
  bool hung_up() {
    for (auto& choice : choices) choice.generation->cancel();
    settle(Outcome::kCancelled);
    return false;
  }
};

/// One call of a stream's content provider: writes what came within a heartbeat. False: the client left.
bool pump_stream(Exchange& exchange, httplib::DataSink& sink, std::chrono::milliseconds heartbeat) {
  const auto write = [&](const std::string& data) { return sink.write(data.data(), data.size()); };
  if (exchange.opened == exchange.streaming) {
    ++exchange.opened;
    for (const json& opening :
         exchange.kind.opening_chunks(exchange.header, static_cast<int64_t>(exchange.streaming))) {
      if (!write(event(opening))) return exchange.hung_up();
    }
  }
  try {
    Choice& choice = exchange.choices[exchange.streaming];
    const auto piece = choice.generation->next(heartbeat);
    if (!piece) return write(": keep-alive\n\n") || exchange.hung_up();
    choice.logprobs.insert(choice.logprobs.end(), piece->logprobs.begin(), piece->logprobs.end());
    const std::string content = choice.reply.feed(piece->text);
    if (!content.empty() && !write(event(exchange.chunk(content, std::nullopt, exchange.take_logprobs(choice))))) {
      return exchange.hung_up();
    }
    if (!piece->finish_reason) return true;
    choice.finish_reason = piece->finish_reason;
    std::string tail = exchange.end_events(choice);
    if (++exchange.streaming < exchange.choices.size()) return write(tail) || exchange.hung_up();
    if (exchange.include_usage) {
      tail += event(usage_chunk(exchange.header, exchange.kind.chunk_object(), exchange.usage()));
    }
    if (!write(tail + "data: [DONE]\n\n")) return exchange.hung_up();
    exchange.settle(Outcome::kCompleted);
  } catch (const ApiError& error) {
    for (auto& choice : exchange.choices) choice.generation->cancel();
    exchange.settle(outcome_of_status(error.status()));
    write(event(error.body()) + "data: [DONE]\n\n");
  }
  sink.done();
  return true;
}

/// The request's connection; where it cannot be found (never expected), the log says once that hang-ups of whole
/// answers go unnoticed.
ClientConnection find_connection(const httplib::Request& request) {
  ClientConnection connection = ClientConnection::of(request);
  static std::once_flag said;
  if (!connection.found()) {
    std::call_once(said, [] {
      log_warn(
          "cannot find a request's connection among this process's sockets: a whole answer's client that hangs "
          "up is not noticed, and its request runs to its end");
    });
  }
  return connection;
}

/// A whole answer, waited for in the handler with nothing sent, so that it leaves with its outcome's status:
/// the body, or the ApiError a generation throws (500, 503, ...). Once a heartbeat passes, the connection is
/// asked whether its client left (without writing to it); false: it did, and the requests are cancelled.
bool wait_for_whole(Exchange& exchange, const httplib::Request& request, std::chrono::milliseconds heartbeat) {
  std::optional<ClientConnection> connection;  // looked up only for an answer slower than a heartbeat
  auto next_look = Clock::now() + heartbeat;
  for (auto& choice : exchange.choices) {
    while (!choice.finish_reason) {
      if (const auto piece = choice.generation->next(heartbeat)) {
        choice.text += piece->text;
        choice.finish_reason = piece->finish_reason;
        choice.logprobs.insert(choice.logprobs.end(), piece->logprobs.begin(), piece->logprobs.end());
      }
      if (Clock::now() < next_look) continue;
      next_look = Clock::now() + heartbeat;
      if (!connection) connection = find_connection(request);
      if (connection->client_left()) return exchange.hung_up();
    }
  }
  return true;
}

}  // namespace

CompletionHandlers::CompletionHandlers(EngineLoop& loop, ServerMetrics& metrics, const ServedModel& model,
                                       std::chrono::milliseconds heartbeat)
    : loop_(loop), metrics_(metrics), model_(model), heartbeat_(heartbeat), vocabulary_(*model.tokenizer) {}

void CompletionHandlers::check_model(const std::string& model) const {
  if (model.empty() || model == model_.id) return;
  throw ApiError(
      404, "not_found_error",
      "the model '" + model + "' is not served here; send \"model\": \"" + model_.id + "\" (GET /v1/models lists it)",
      "model");
}

namespace {

/// The sampling fields as the engine's options. ApiError 400 for what only the model can check: a logit_bias id
/// outside the tokenizer's `vocabulary`, min_tokens above the tokens the request may draw.
void apply_sampling_fields(const SamplingFields& fields, int64_t vocabulary, infer::RequestOptions& options) {
  for (const auto& [id, bias] : fields.logit_bias) {
    if (id < vocabulary) continue;
    throw invalid_request("'logit_bias' names token " + std::to_string(id) + ", outside the vocabulary (" +
                              std::to_string(vocabulary) + " ids); send ids from 0 to " +
                              std::to_string(vocabulary - 1),
                          "logit_bias");
  }
  if (fields.min_tokens > options.max_new_tokens) {
    throw invalid_request("'min_tokens' is " + std::to_string(fields.min_tokens) + ", more than the " +
                              std::to_string(options.max_new_tokens) +
                              " tokens the request may draw; send at most that many, or a larger max_tokens",
                          "min_tokens");
  }
  options.sampling.min_p = fields.min_p;
  options.controls.presence_penalty = fields.presence_penalty;
  options.controls.frequency_penalty = fields.frequency_penalty;
  options.controls.repetition_penalty = fields.repetition_penalty;
  options.controls.logit_bias = fields.logit_bias;
  options.controls.min_tokens = fields.min_tokens;
  options.logprobs = fields.logprobs;
}

/// The request field a refusal of its sampling is about: the grammar's, a control's, logprobs, else temperature
/// (the engine refuses grammars and controls together under tensor parallelism).
std::string sampling_param(const GenerationFields& fields) {
  if (fields.grammar) return fields.grammar_param;
  if (const std::string control = fields.sampling.first_control(); !control.empty()) return control;
  return fields.sampling.logprobs >= 0 ? "logprobs" : "temperature";
}

/// The request field a refusal is about.
std::string param_of(infer::RejectedPart part, const RequestKind& kind, const GenerationFields& fields) {
  switch (part) {
    case infer::RejectedPart::kPrompt: return kind.prompt_param();
    case infer::RejectedPart::kMaxNewTokens: return "max_tokens";  // chat takes it too, beside max_completion_tokens
    case infer::RejectedPart::kSampling: return sampling_param(fields);
    case infer::RejectedPart::kCache:
    case infer::RejectedPart::kStepTokens: return "";
  }
  return "";
}

}  // namespace

GenerationPlan CompletionHandlers::plan(std::vector<int64_t> prompt, const GenerationFields& fields,
                                        const RequestKind& kind, const std::string& label) const {
  GenerationPlan plan;
  const auto length = static_cast<int64_t>(prompt.size());
  if (length == 0)
    throw invalid_request(label + "the prompt is empty; send at least one token of text", kind.prompt_param());
  plan.options.max_new_tokens = fields.max_tokens.value_or(kind.default_max_tokens(length, model_.context));
  plan.options.sampling.temperature = fields.temperature;
  plan.options.sampling.top_k = fields.top_k;
  plan.options.sampling.top_p = fields.top_p;
  plan.options.sampling.seed = fields.seed.value_or(fresh_seed());
  if (!fields.ignore_eos) plan.options.stop_tokens = model_.end_tokens;
  plan.options.stop_tokens.insert(plan.options.stop_tokens.end(), fields.stop_ids.begin(), fields.stop_ids.end());
  plan.stop_strings = fields.stop_strings;
  apply_sampling_fields(fields.sampling, model_.tokenizer->vocab_size(), plan.options);
  if (fields.grammar) {
    plan.options.constraint = std::make_shared<GrammarConstraint>(fields.grammar, vocabulary_.table(),
                                                                  vocabulary_.trie(), plan.options.stop_tokens);
  }
  if (const auto refused = loop_.rejection(prompt, plan.options)) {
    throw invalid_request(label + refused->message(), param_of(refused->part, kind, fields));
  }
  plan.prompt = std::move(prompt);
  return plan;
}

void CompletionHandlers::refuse_more_than_capacity(int64_t prompts, int64_t choices, const RequestKind& kind) const {
  if (prompts * choices <= loop_.capacity()) return;
  const std::string held = std::to_string(loop_.capacity());
  if (choices == 1) {
    throw invalid_request("'prompt' holds " + std::to_string(prompts) +
                              " prompts, more than this server holds at once (" + held +
                              ", running and queued); send at most " + held + " per request",
                          "prompt");
  }
  throw invalid_request("the request asks for " + std::to_string(prompts * choices) + " choices (" +
                            std::to_string(prompts) + " " + (prompts == 1 ? "prompt" : "prompts") +
                            " x n = " + std::to_string(choices) + "), more than this server holds at once (" + held +
                            ", running and queued); send at most " + held + " in all",
                        prompts == 1 ? "n" : kind.prompt_param());
}

void CompletionHandlers::run(const RequestKind& kind, std::vector<std::vector<int64_t>> prompts,
                             const GenerationFields& fields, const ReplyReading& reading,
                             const httplib::Request& request, httplib::Response& response) {
  const auto arrival = Clock::now();
  ResponseHeader header{new_id(kind.id_prefix()), model_.id, static_cast<int64_t>(std::time(nullptr))};
  refuse_more_than_capacity(static_cast<int64_t>(prompts.size()), fields.choices, kind);
  std::vector<GenerationPlan> plans;  // every prompt checked before any is queued; n draws of each, in order
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const std::string label =
        prompts.size() > 1 ? "prompt " + std::to_string(i + 1) + " of " + std::to_string(prompts.size()) + ": " : "";
    for (int64_t draw = 0; draw < fields.choices; ++draw) {
      GenerationFields drawn = fields;  // a given seed moves on by one per draw, so the n choices differ
      if (drawn.seed) *drawn.seed += static_cast<uint64_t>(draw);
      plans.push_back(plan(prompts[i], drawn, kind, label));
    }
  }
  std::vector<Choice> choices;
  for (auto& planned : plans) {
    // The n choices of a prompt reuse the first one's prompt (its keys and values), which is computed once.
    const std::size_t draw = choices.size() % static_cast<std::size_t>(fields.choices);
    const Generation* same_prompt = draw == 0 ? nullptr : choices[choices.size() - draw].generation.get();
    choices.push_back({std::make_unique<Generation>(loop_, *model_.tokenizer, std::move(planned), arrival, same_prompt),
                       ToolCallStream(reading.format, reading.callable),
                       "",
                       {},
                       {},
                       0});
  }
  if (fields.grammar) metrics_.count_structured(fields.grammar->source);
  std::shared_ptr<const VocabularyTable> table;  // built on the first request that asks for log probabilities
  if (fields.sampling.logprobs >= 0) table = vocabulary_.table();
  auto exchange = std::make_shared<Exchange>(std::move(choices), header, kind, reading, fields.include_usage,
                                             std::move(table), metrics_, open_);
  if (!fields.stream) {
    if (!wait_for_whole(*exchange, request, heartbeat_)) return;  // the client left: nobody reads an answer
    response.set_content(exchange->body().dump(), "application/json");
    exchange->settle(Outcome::kCompleted);
    return;
  }
  const auto heartbeat = heartbeat_;
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider(
      "text/event-stream",
      [exchange, heartbeat](size_t, httplib::DataSink& sink) { return pump_stream(*exchange, sink, heartbeat); },
      [exchange](bool) {
        if (!exchange->settled) exchange->hung_up();
      });
}

void CompletionHandlers::completions(const httplib::Request& request, httplib::Response& response) {
  const CompletionRequest parsed = parse_completion_request(parse_body(request.body));
  check_model(parsed.model);
  std::vector<std::vector<int64_t>> prompts;
  for (const PromptInput& prompt : parsed.prompts) {
    prompts.push_back(prompt.text ? model_.tokenizer->encode(*prompt.text, /*add_special_tokens=*/true) : prompt.ids);
  }
  run(completion_kind(), std::move(prompts), parsed.generation, ReplyReading{}, request, response);
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
  ReplyReading reading;
  if (!parsed.callable.empty())
    reading = {model_.chat->tool_call_format(), parsed.callable, parsed.parallel_tool_calls};
  GenerationFields fields = parsed.generation;
  if (parsed.tool_choice == ToolChoice::kRequired || parsed.tool_choice == ToolChoice::kFunction) {
    // The reply is drawn under the calls' grammar, so it reads back as calls (one, unless required and parallel).
    const bool several = parsed.tool_choice == ToolChoice::kRequired && parsed.parallel_tool_calls;
    fields.grammar = tool_call_grammar(parsed.tools, parsed.callable, reading.format, several);
    fields.grammar_param = "tool_choice";
  }
  run(chat_kind(), {model_.tokenizer->encode(text, /*add_special_tokens=*/false)}, fields, reading, request, response);
}

}  // namespace graphed::serve
