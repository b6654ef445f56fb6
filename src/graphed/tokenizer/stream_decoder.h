// tokenizer/stream_decoder.h — StreamDecoder: decodes ids one at a time, as a model generates them, and
// returns only text that is complete: a character whose bytes are split over several byte-level or
// <0xXX> tokens comes out once its last byte arrives, so a terminal never shows half of it. Same
// method as HF tokenizers' DecodeStream: decode a short window of recent ids, hold back while it ends
// in U+FFFD, emit what the window added beyond its previous text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graphed/tokenizer/tokenizer.h"

namespace graphed::tokenizer {

class StreamDecoder {
 public:
  /// The tokenizer is not owned; it outlives this decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  /// Feeds one id; returns the new complete text (often empty while a character is incomplete).
  /// Throws DataError for an id outside the vocabulary (the decoder's state is unchanged then).
  std::string push(int64_t id);

  /// Returns whatever is still held back (an incomplete character as U+FFFD) and starts afresh.
  std::string finish();

 private:
  const Tokenizer* tokenizer_;  // not owned; outlives this
  bool skip_special_tokens_;
  std::vector<int64_t> ids_;  // the window: context ids, then ids not yet emitted
  std::string prefix_;        // decode of ids_[0, prefix_index_): text already emitted
  std::size_t prefix_index_ = 0;
};

}  // namespace graphed::tokenizer
