// serve/generation.cpp — see serve/generation.h.
#include "graphed/serve/generation.h"

#include <utility>

#include "graphed/serve/api_error.h"

namespace graphed::serve {

Generation::Generation(EngineLoop& loop, const tokenizer::Tokenizer& tokenizer, GenerationPlan plan,
                       Clock::time_point arrival, const Generation* same_prompt)
    : pieces_(tokenizer, std::move(plan.stop_strings)), prompt_length_(plan.prompt.size()), arrival_(arrival) {
  stream_ = loop.submit(std::move(plan.prompt), std::move(plan.options), same_prompt ? same_prompt->stream_ : nullptr);
  if (stream_) return;
  if (!loop.snapshot().accepting) {
    throw ApiError(503, "server_error",
                   "the server is shutting down and takes no new requests; send it to another server");
  }
  throw ApiError(429, "rate_limit_error",
                 "the server's queue is full; retry after a second, or raise the server's "
                 "--max-queued-requests");
}

Generation::~Generation() {
  if (!finished_ && stream_) stream_->cancel();
}

void Generation::cancel() {
  if (!finished_) stream_->cancel();
}

std::optional<Generation::Piece> Generation::next(std::chrono::milliseconds timeout) {
  if (finished_) return Piece{"", std::nullopt};
  const auto event = stream_->next(timeout);
  if (!event) return std::nullopt;
  if (event->finished) return finish(*event->finished);
  const auto now = Clock::now();
  if (completion_tokens_++ == 0) first_token_ = now;
  last_token_ = now;
  if (stopped_by_string_) return Piece{};  // its cancellation is on the way
  std::optional<TokenLogprob> logprobs;
  if (event->logprobs) logprobs = TokenLogprob{*event->token, event->logprobs->logprob, event->logprobs->top};
  TextPieces::Piece piece = pieces_.push(*event->token, std::move(logprobs));
  if (piece.stopped) {
    stopped_by_string_ = true;
    stream_->cancel();
  }
  return Piece{std::move(piece.text), std::nullopt, std::move(piece.logprobs)};
}

Generation::Piece Generation::finish(const infer::FinishedRequest& done) {
  finished_ = true;
  switch (done.reason) {
    case infer::FinishReason::kStopToken:
    case infer::FinishReason::kLength: {
      TextPieces::Piece piece = pieces_.finish();
      return {std::move(piece.text), std::string(done.reason == infer::FinishReason::kLength ? "length" : "stop"),
              std::move(piece.logprobs)};
    }
    case infer::FinishReason::kCancelled:
      if (stopped_by_string_) return {"", std::string("stop"), {}};
      throw ApiError(503, "server_error", "the server shut down before the request finished; send it again");
    case infer::FinishReason::kRejected:
      if (done.message == EngineLoop::kEngineFailure) {
        throw ApiError(500, "server_error", "the engine stopped after an internal error; the server's log says more");
      }
      throw invalid_request(done.message);
  }
  return {"", std::string("stop"), {}};
}

double Generation::first_token_seconds() const {
  return completion_tokens_ == 0 ? 0.0 : std::chrono::duration<double>(first_token_ - arrival_).count();
}

double Generation::per_output_token_seconds() const {
  if (completion_tokens_ < 2) return 0.0;
  return std::chrono::duration<double>(last_token_ - first_token_).count() /
         static_cast<double>(completion_tokens_ - 1);
}

double Generation::duration_seconds() const {
  const auto end = completion_tokens_ == 0 ? Clock::now() : last_token_;
  return std::chrono::duration<double>(end - arrival_).count();
}

}  // namespace graphed::serve
