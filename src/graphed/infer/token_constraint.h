// infer/token_constraint.h — what a request's output must follow (structured output: a grammar over the
// tokenizer's vocabulary), as the serving engine asks it: before each draw the tokens allowed next, as a bitmask
// the step applies on the device (the other tokens' logits set to -inf); after it, the token drawn. The engine
// knows no grammars: serve/ adapts grammar/'s matcher to this.
#pragma once

#include <cstdint>

namespace graphed::infer {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  /// Writes the tokens allowed next into `words`: `word_count` = (vocabulary + 31) / 32 uint32 words over the
  /// engine's drawable vocabulary, token t at bit t % 32 of word t / 32. Sets at least one bit. The engine may call
  /// allowed() of different requests on different threads at once, never one request's twice at once.
  virtual void allowed(std::uint32_t* words, std::int64_t word_count) = 0;
  /// Moves on by the token drawn (one the last mask allowed).
  virtual void accept(std::int64_t token) = 0;
  /// True when the output is complete and nothing may follow: the engine ends the request (reason: stop token).
  virtual bool finished() const = 0;
};

}  // namespace graphed::infer
