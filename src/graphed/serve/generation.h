// serve/generation.h — one accepted request as the HTTP side sees it: submitted to the engine loop, its
// tokens come back as text pieces (serve/text_pieces.h: complete characters, special tokens left out, `stop`
// strings cut, each piece with the log probabilities of the tokens whose text it carries when asked for), then its
// end: why it finished, the token counts and the timings.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graphed/serve/engine_loop.h"
#include "graphed/serve/openai_protocol.h"
#include "graphed/serve/text_pieces.h"

namespace graphed::serve {

using Clock = std::chrono::steady_clock;

/// What to run: the prompt's ids, the engine's options, and the stop strings.
struct GenerationPlan {
  std::vector<int64_t> prompt;
  infer::RequestOptions options;
  std::vector<std::string> stop_strings;
};

class Generation {
 public:
  /// Submits the plan. Throws ApiError 429 when the loop's queue is full, 503 when it no longer takes
  /// requests (shutting down, or the engine failed). `same_prompt`: a generation of the same prompt submitted
  /// before (the first of n choices), whose prompt's keys and values this one reuses.
  Generation(EngineLoop& loop, const tokenizer::Tokenizer& tokenizer, GenerationPlan plan, Clock::time_point arrival,
             const Generation* same_prompt = nullptr);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  struct Piece {
    std::string text;
    std::optional<std::string> finish_reason;  ///< set on the last piece: "stop" or "length"
    /// When the request asked for log probabilities: those of the tokens whose text ends in this piece
    /// (TextPieces::Piece says which).
    std::vector<TokenLogprob> logprobs;
  };
  /// The next piece, waiting up to `timeout`; nullopt when nothing came in time. Throws ApiError 500 when
  /// the engine failed, 503 when shutdown cancelled the request.
  std::optional<Piece> next(std::chrono::milliseconds timeout);
  /// Ends the request early (the client hung up): its blocks go back.
  void cancel();
  bool finished() const { return finished_; }

  Usage usage() const { return {static_cast<int64_t>(prompt_length_), completion_tokens_}; }
  /// Seconds from arrival to the first token, per output token after it, and to the end.
  double first_token_seconds() const;
  double per_output_token_seconds() const;
  double duration_seconds() const;

 private:
  Piece finish(const infer::FinishedRequest& done);

  std::shared_ptr<RequestStream> stream_;
  TextPieces pieces_;
  std::size_t prompt_length_;
  int64_t completion_tokens_ = 0;
  bool finished_ = false;
  bool stopped_by_string_ = false;
  Clock::time_point arrival_;
  Clock::time_point first_token_;
  Clock::time_point last_token_;
};

}  // namespace graphed::serve
