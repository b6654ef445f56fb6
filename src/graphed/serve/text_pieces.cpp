// serve/text_pieces.cpp — see serve/text_pieces.h. A token's log probabilities wait until the text it ends has
// passed the stop strings: the decoder may hold a token's bytes back (part of a character) and the stop strings a
// piece's tail (the start of a stop string), so an entry goes out with the piece that carries the end of its text.
#include "graphed/serve/text_pieces.h"

#include <utility>

namespace graphed::serve {

TextPieces::TextPieces(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : decoder_(tokenizer, /*skip_special_tokens=*/true), stops_(std::move(stop_strings)) {}

TextPieces::Piece TextPieces::push(int64_t token, std::optional<TokenLogprob> logprobs) {
  if (stopped_) return {"", true, {}};
  if (logprobs) pending_.push_back({std::move(*logprobs), kNotDecoded});
  return show(decoder_.push(token), /*last=*/false);
}

TextPieces::Piece TextPieces::finish() {
  if (stopped_) return {"", true, {}};
  return show(decoder_.finish(), /*last=*/true);
}

TextPieces::Piece TextPieces::show(const std::string& decoded, bool last) {
  decoded_bytes_ += decoded.size();
  if (!decoded.empty()) {  // the tokens still waiting for text (a character split over them) end here
    for (auto pending = pending_.rbegin(); pending != pending_.rend() && pending->end == kNotDecoded; ++pending) {
      pending->end = decoded_bytes_;
    }
  }
  const StopStrings::Piece passed = stops_.push(decoded);
  stopped_ = passed.stopped;
  Piece piece{passed.text, stopped_, {}};
  if (last && !stopped_) piece.text += stops_.finish();
  shown_bytes_ += piece.text.size();
  while (!pending_.empty() && (pending_.front().end <= shown_bytes_ || (last && !stopped_))) {
    piece.logprobs.push_back(std::move(pending_.front().entry));
    pending_.pop_front();
  }
  if (stopped_) pending_.clear();  // their text is cut with the stop string
  return piece;
}

}  // namespace graphed::serve
