// serve/metrics.h — what GET /metrics reports, in Prometheus's text format: requests by outcome, structured
// requests by the field that constrained them, tokens in and out, time to first token, time per output token and
// request duration as histograms (counted by the HTTP threads), and the engine's queue, running requests, KV blocks,
// graph / eager steps, step durations and token-mask work (counted by the engine loop, read from its snapshot when
// scraped).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "graphed/serve/engine_loop.h"
#include "graphed/serve/histogram.h"

namespace graphed::serve {

/// How a request ended, for graphed_requests_total{outcome=...}.
enum class Outcome { kCompleted, kCancelled, kInvalid, kRefused, kFailed };
/// The outcome of a request answered with an error status: 429 refused, 5xx failed, else invalid.
Outcome outcome_of_status(int status);

class ServerMetrics {
 public:
  ServerMetrics();
  void count(Outcome outcome);
  /// A request whose output follows a grammar, by where it came from: "json_schema", "json_object", "tool_calls".
  void count_structured(const std::string& source);
  /// A request that produced tokens: its token counts and timings (seconds).
  void record(int64_t prompt_tokens, int64_t completion_tokens, double first_token, double per_output_token,
              double duration);
  /// The whole page; `blocks_total` and `max_requests` are the engine's sizes.
  std::string render(const LoopSnapshot& snapshot, int64_t blocks_total, int64_t max_requests) const;

 private:
  mutable std::mutex mutex_;
  std::map<Outcome, int64_t> outcomes_;
  std::map<std::string, int64_t> structured_;  // by source; every source listed from the start
  int64_t prompt_tokens_ = 0;
  int64_t completion_tokens_ = 0;
  Histogram first_token_;
  Histogram per_output_token_;
  Histogram duration_;
};

}  // namespace graphed::serve
