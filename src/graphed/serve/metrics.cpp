// serve/metrics.cpp — see serve/metrics.h. Every metric is prefixed graphed_ and has HELP and TYPE lines.
#include "graphed/serve/metrics.h"

namespace graphed::serve {
namespace {

void heading(std::string& out, const std::string& name, const std::string& type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void single(std::string& out, const std::string& name, const std::string& type, const std::string& help, double value) {
  heading(out, name, type, help);
  out += name + " " + metric_number(value) + "\n";
}

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kCompleted: return "completed";
    case Outcome::kCancelled: return "cancelled";
    case Outcome::kInvalid: return "invalid";
    case Outcome::kRefused: return "refused";
    case Outcome::kFailed: return "failed";
  }
  return "failed";
}

}  // namespace

Outcome outcome_of_status(int status) {
  if (status == 429) return Outcome::kRefused;
  return status >= 500 ? Outcome::kFailed : Outcome::kInvalid;
}

ServerMetrics::ServerMetrics()
    : first_token_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      per_output_token_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}),
      duration_({0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480}) {
  for (const Outcome outcome :
       {Outcome::kCompleted, Outcome::kCancelled, Outcome::kInvalid, Outcome::kRefused, Outcome::kFailed}) {
    outcomes_[outcome] = 0;
  }
  for (const char* source : {"choice", "json_object", "json_schema", "regex", "tool_calls"}) structured_[source] = 0;
}

void ServerMetrics::count(Outcome outcome) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++outcomes_[outcome];
}

void ServerMetrics::count_structured(const std::string& source) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++structured_[source];
}

void ServerMetrics::record(int64_t prompt_tokens, int64_t completion_tokens, double first_token,
                           double per_output_token, double duration) {
  std::lock_guard<std::mutex> lock(mutex_);
  prompt_tokens_ += prompt_tokens;
  completion_tokens_ += completion_tokens;
  if (completion_tokens > 0) first_token_.observe(first_token);
  if (completion_tokens > 1) per_output_token_.observe(per_output_token);
  duration_.observe(duration);
}

std::string ServerMetrics::render(const LoopSnapshot& snapshot, int64_t blocks_total, int64_t max_requests) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  heading(
      out, "graphed_requests_total", "counter",
      "Requests by outcome: completed, cancelled (the client hung up), invalid (400), refused (429), failed (500).");
  for (const auto& [outcome, count] : outcomes_) {
    out += std::string("graphed_requests_total{outcome=\"") + outcome_name(outcome) + "\"} " + std::to_string(count) +
           "\n";
  }
  heading(out, "graphed_structured_requests_total", "counter",
          "Requests whose output follows a grammar, by what asked for it: a JSON schema (response_format or "
          "vLLM's structured_outputs), json_object, a regex or a choice (structured_outputs), or a tool_choice that "
          "requires a call (tool_calls).");
  for (const auto& [source, count] : structured_) {
    out += "graphed_structured_requests_total{source=\"" + source + "\"} " + std::to_string(count) + "\n";
  }
  single(out, "graphed_queued_requests", "gauge", "Requests accepted and waiting for the engine.",
         static_cast<double>(snapshot.queued));
  single(out, "graphed_running_requests", "gauge", "Requests in the engine.", static_cast<double>(snapshot.active));
  single(out, "graphed_max_running_requests", "gauge", "The engine's --inference-max-requests.",
         static_cast<double>(max_requests));
  single(out, "graphed_kv_blocks_in_use", "gauge", "KV cache blocks held by requests.",
         static_cast<double>(snapshot.blocks_in_use));
  single(out, "graphed_kv_blocks_total", "gauge", "KV cache blocks requests can hold.",
         static_cast<double>(blocks_total));
  single(out, "graphed_prompt_tokens_total", "counter", "Prompt tokens of requests that ran.",
         static_cast<double>(prompt_tokens_));
  single(out, "graphed_generation_tokens_total", "counter", "Tokens drawn for clients.",
         static_cast<double>(completion_tokens_));
  heading(out, "graphed_engine_steps_total", "counter",
          "Engine steps: replayed from CUDA graphs, or run eagerly (no graph bucket fits, or scope none).");
  out += "graphed_engine_steps_total{mode=\"graph\"} " + std::to_string(snapshot.stats.graph_steps) + "\n";
  out += "graphed_engine_steps_total{mode=\"eager\"} " + std::to_string(snapshot.stats.eager_steps) + "\n";
  single(out, "graphed_engine_unmatched_steps_total", "counter", "Eager steps that no graph bucket fitted.",
         static_cast<double>(snapshot.stats.unmatched_steps));
  single(out, "graphed_preemptions_total", "counter", "Requests whose blocks were taken back, to be recomputed.",
         static_cast<double>(snapshot.stats.preemptions));
  single(out, "graphed_masked_steps_total", "counter",
         "Engine steps with a request whose output follows a grammar (a token mask per such request).",
         static_cast<double>(snapshot.stats.masked_steps));
  single(out, "graphed_mask_seconds_total", "counter",
         "Host seconds the engine spent computing those steps' token masks (part of its step time).",
         snapshot.stats.mask_seconds);
  single(out, "graphed_spec_decode_num_drafts_total", "counter",
         "Speculative decoding: verifications (a request's proposed tokens checked in one step).",
         static_cast<double>(snapshot.stats.verifications));
  single(out, "graphed_spec_decode_draft_tokens_total", "counter", "Speculative decoding: tokens proposed.",
         static_cast<double>(snapshot.stats.draft_tokens));
  single(out, "graphed_spec_decode_accepted_tokens_total", "counter",
         "Speculative decoding: proposed tokens the model kept.", static_cast<double>(snapshot.stats.accepted_tokens));
  single(out, "graphed_engine_up", "gauge", "1 while the engine takes requests.", snapshot.accepting ? 1.0 : 0.0);
  heading(out, "graphed_step_duration_seconds", "histogram",
          "Engine steps that ran, on the host's clock around each step on the engine loop's thread.");
  snapshot.step_durations.render("graphed_step_duration_seconds", out);
  heading(out, "graphed_time_to_first_token_seconds", "histogram", "From the request's arrival to its first token.");
  first_token_.render("graphed_time_to_first_token_seconds", out);
  heading(out, "graphed_time_per_output_token_seconds", "histogram",
          "Between a request's first and last token, per token.");
  per_output_token_.render("graphed_time_per_output_token_seconds", out);
  heading(out, "graphed_request_duration_seconds", "histogram", "From the request's arrival to its last token.");
  duration_.render("graphed_request_duration_seconds", out);
  return out;
}

}  // namespace graphed::serve
