// infer/logit_controls.h — what a serving step does to the logits between the model and the draw, on the device
// and inside the step's graph: each request's penalties, logit bias and min-tokens ban (per-request rows of tables
// that live as long as the request), min-p, the token mask of structured output, and the log probabilities it
// reports. Every per-request value is a row of a tensor, so one graph serves every mix of requests; a step pays
// only for the features some request in it asks for (SamplingFeatures keys its graphs).
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace graphed::infer {

/// What a step's sampling must do beyond its SamplingMode.
struct SamplingFeatures {
  bool logprobs = false;    ///< report the drawn token's log probability and the likeliest tokens'
  bool controlled = false;  ///< penalties, logit bias, min tokens or min-p
  bool masked = false;      ///< a token mask (structured output): the host writes it after the model has run

  int code() const { return (logprobs ? 1 : 0) | (controlled ? 2 : 0) | (masked ? 4 : 0); }
  static SamplingFeatures from_code(int code) { return {(code & 1) != 0, (code & 2) != 0, (code & 4) != 0}; }
  SamplingFeatures& operator|=(const SamplingFeatures& other) {
    logprobs |= other.logprobs;
    controlled |= other.controlled;
    masked |= other.masked;
    return *this;
  }
};

/// Per-request state on the device, one row per control slot: slot 0 is neutral (all zero: no bias, nothing
/// drawn), the last slot takes the counts of rows that keep none. [slots, vocabulary] each.
struct LogitTables {
  at::Tensor bias;         ///< float32: logit bias, and -inf on stop tokens while min tokens is not reached
  at::Tensor counts;       ///< int32: times each token was drawn
  at::Tensor prompt_seen;  ///< bool: tokens of the prompt (the repetition penalty's)

  bool defined() const { return bias.defined(); }
  /// Tables of `slots` rows over `vocabulary` tokens, zero.
  static LogitTables zeros(int64_t slots, int64_t vocabulary, const at::Device& device);
};

/// Each row's controls in one step, device tensors [requests].
struct ControlRows {
  at::Tensor slot;        ///< int64: the request's control slot (0: none)
  at::Tensor count_slot;  ///< int64: where its drawn token is counted (the scratch slot for rows that keep none)
  at::Tensor presence;    ///< float64: presence penalty
  at::Tensor frequency;   ///< float64: frequency penalty
  at::Tensor repetition;  ///< float64: repetition penalty (1: none)
  at::Tensor min_p_gap;   ///< float64: temperature x ln(min-p), the farthest below the top logit a token may be; -inf
};

/// Logits [requests, vocabulary] float32 after each row's bias, min-tokens ban and penalties (vLLM's order: bias
/// first, then the repetition penalty on tokens of the prompt or drawn, then frequency and presence on drawn ones),
/// and min-p (a token more than min_p_gap below its row's largest logit is dropped).
at::Tensor apply_controls(const at::Tensor& logits, const ControlRows& rows, const LogitTables& tables);

/// Logits with the tokens a row's mask does not allow set to -inf. mask: int32 [requests, words], token t at bit
/// t % 32 of word t / 32.
at::Tensor apply_token_mask(const at::Tensor& logits, const at::Tensor& mask);

/// Counts each row's drawn token in its count slot's row.
void count_drawn(const LogitTables& tables, const at::Tensor& count_slot, const at::Tensor& tokens);

/// The first half of the log probabilities, from the logits before any control: writes each row's log of the
/// partition function into column 0 of `out` (float32 [requests, 1 + top]) and its likeliest tokens' log
/// probabilities into the other columns, their ids into `top_ids` (int64 [requests, top]).
void record_top_logprobs(const at::Tensor& logits, at::Tensor& out, at::Tensor& top_ids);
/// The second half, once the tokens are drawn: column 0 of `out` becomes the drawn token's log probability.
void record_drawn_logprob(const at::Tensor& logits, const at::Tensor& tokens, at::Tensor& out);

}  // namespace graphed::infer
