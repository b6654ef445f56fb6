// serve/text_pieces.h — TextPieces: one request's drawn tokens turned into the pieces of text a client is sent:
// decoded one token at a time (complete characters only, special tokens left out: tokenizer/stream_decoder.h),
// `stop` strings cut (serve/stop_strings.h), and each piece with the log probabilities of the tokens whose text it
// carries. Torch-free; serve/generation.h feeds it the engine's tokens.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "graphed/serve/logprobs_output.h"
#include "graphed/serve/stop_strings.h"
#include "graphed/tokenizer/stream_decoder.h"

namespace graphed::serve {

class TextPieces {
 public:
  /// tokenizer: not owned; it outlives this.
  TextPieces(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  struct Piece {
    std::string text;
    bool stopped = false;  ///< a stop string ended the text: nothing comes after this piece
    /// The log probabilities of the tokens whose text ends in this piece. A token that adds no text of its own
    /// comes with the next one that does (a character split over tokens), or with the last piece (an end token);
    /// one whose text a stop string cuts is dropped with that text.
    std::vector<TokenLogprob> logprobs;
  };
  /// The text a drawn token completes, with `logprobs` when the request asked for them. After a stopped piece,
  /// tokens give nothing.
  Piece push(int64_t token, std::optional<TokenLogprob> logprobs);
  /// At the request's end: whatever is still held (an incomplete character, a possible stop string's start).
  Piece finish();

 private:
  /// Hands `decoded` on through the stop strings (and what they hold, when `last`), with the log probabilities of
  /// the tokens its text completes.
  Piece show(const std::string& decoded, bool last);

  /// A token's log probabilities until the text it ends is handed on.
  struct Pending {
    TokenLogprob entry;
    std::size_t end;  ///< decoded_bytes_ once its text was decoded (kNotDecoded before)
  };
  static constexpr std::size_t kNotDecoded = static_cast<std::size_t>(-1);

  tokenizer::StreamDecoder decoder_;
  StopStrings stops_;
  std::deque<Pending> pending_;
  std::size_t decoded_bytes_ = 0;  // of text out of the decoder
  std::size_t shown_bytes_ = 0;    // of text handed on (past the stop strings)
  bool stopped_ = false;
};

}  // namespace graphed::serve
