// serve/completion_handlers.h — POST /v1/completions and POST /v1/chat/completions: a checked request
// becomes prompts (each text encoded, or the chat rendered by the model's template), the engine loop
// runs each as a request of its own (under a grammar of its own when the output is constrained: response_format,
// or a tool_choice that requires a call), and the answer goes back whole (one choice per prompt, with the status of
// its outcome: 200, or the error's own) or as server-sent events ending in "data: [DONE]", with log probabilities
// when asked for. A client that hangs up cancels its requests, so their blocks go back at once.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include <httplib.h>

#include "graphed/serve/engine_loop.h"
#include "graphed/serve/generation.h"
#include "graphed/serve/metrics.h"
#include "graphed/serve/openai_protocol.h"
#include "graphed/serve/served_model.h"
#include "graphed/serve/tool_calls.h"
#include "graphed/serve/vocabulary_table.h"

namespace graphed::serve {

class RequestKind;

/// How a request's replies are read: as text (a completion, or a chat without callable tools), or as a chat reply
/// that may hold calls of `callable` in the template's format (serve/tool_calls.h).
struct ReplyReading {
  ToolCallFormat format = ToolCallFormat::kNone;
  std::vector<std::string> callable;
  bool parallel = true;  ///< false: only a reply's first call
};

class CompletionHandlers {
 public:
  /// `heartbeat`: how often a waiting response looks for a hung-up client: a stream writes an SSE comment,
  /// a whole answer asks its connection without writing to it.
  CompletionHandlers(EngineLoop& loop, ServerMetrics& metrics, const ServedModel& model,
                     std::chrono::milliseconds heartbeat);

  /// Each reads its endpoint's request into prompts and runs them as its kind (serve/request_kind.h). Both
  /// throw ApiError for a request they refuse before it runs.
  void completions(const httplib::Request& request, httplib::Response& response);
  void chat(const httplib::Request& request, httplib::Response& response);
  /// Requests accepted and not yet fully answered (their responses may still be streaming).
  int open_requests() const { return open_->load(); }

 private:
  /// Runs the prompts (a chat has one) and answers, in the kind's shape, whole or streamed.
  void run(const RequestKind& kind, std::vector<std::vector<int64_t>> prompts, const GenerationFields& fields,
           const ReplyReading& reading, const httplib::Request& request, httplib::Response& response);
  /// The engine's options for one prompt (`label` names it among several: "prompt 2 of 3: "), with a constraint of
  /// its own when the fields carry a grammar; ApiError 400 naming the field at fault when the engine would refuse it.
  GenerationPlan plan(std::vector<int64_t> prompt, const GenerationFields& fields, const RequestKind& kind,
                      const std::string& label) const;
  void check_model(const std::string& model) const;
  /// ApiError 400 when `prompts` x `choices` (n) requests are more than the server holds at once.
  void refuse_more_than_capacity(int64_t prompts, int64_t choices, const RequestKind& kind) const;

  EngineLoop& loop_;
  ServerMetrics& metrics_;
  const ServedModel& model_;
  std::chrono::milliseconds heartbeat_;
  ServerVocabulary vocabulary_;  // token texts (logprobs) and the trie (structured output), built when first needed
  std::shared_ptr<std::atomic<int>> open_ = std::make_shared<std::atomic<int>>(0);
};

}  // namespace graphed::serve
