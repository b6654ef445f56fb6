// serve/completion_handlers.h — POST /v1/completions and POST /v1/chat/completions: a checked request
// becomes a prompt (the text encoded, or the chat rendered by the model's template), the engine loop
// runs it, and the answer goes back whole or as server-sent events ending in "data: [DONE]". A client
// that hangs up cancels its request, so its blocks go back at once.
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

namespace graphed::serve {

class CompletionHandlers {
 public:
  /// `heartbeat`: how often a waiting response writes something (an SSE comment, or a space before a JSON
  /// body), which is how a hung-up client is noticed.
  CompletionHandlers(EngineLoop& loop, ServerMetrics& metrics, const ServedModel& model,
                     std::chrono::milliseconds heartbeat);

  /// Both throw ApiError for a request they refuse before it runs.
  void completions(const httplib::Request& request, httplib::Response& response);
  void chat(const httplib::Request& request, httplib::Response& response);
  /// Requests accepted and not yet fully answered (their responses may still be streaming).
  int open_requests() const { return open_->load(); }

 private:
  /// Runs a prompt and answers, in the endpoint's shape (chat or not), whole or streamed.
  void run(bool chat, std::vector<int64_t> prompt, const GenerationFields& fields, httplib::Response& response);
  /// The engine's options for the request; ApiError 400 when the engine would refuse it.
  GenerationPlan plan(std::vector<int64_t> prompt, const GenerationFields& fields, bool chat) const;
  void check_model(const std::string& model) const;

  EngineLoop& loop_;
  ServerMetrics& metrics_;
  const ServedModel& model_;
  std::chrono::milliseconds heartbeat_;
  std::shared_ptr<std::atomic<int>> open_ = std::make_shared<std::atomic<int>>(0);
};

}  // namespace graphed::serve
