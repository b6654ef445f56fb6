// infer/request.h — one request of the serving engine: its prompt and the tokens drawn so far, its own
// sampling settings, stop ids and token limit, and where it stands in the engine: how many of its
// tokens have keys and values in the cache, which blocks hold them, and its Mamba state slot.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graphed/infer/sampler.h"
#include "graphed/infer/token_constraint.h"

namespace graphed::infer {

/// What a request changes in the model's logits before its draw, applied on the device inside the step
/// (OpenAI's and vLLM's semantics). The logprobs a request asks for are the model's own, before these.
struct LogitControls {
  double presence_penalty = 0;    ///< subtracted from the logit of every token drawn before (OpenAI: -2 to 2)
  double frequency_penalty = 0;   ///< subtracted once per time a token was drawn before (OpenAI: -2 to 2)
  double repetition_penalty = 1;  ///< vLLM's: tokens of the prompt or drawn before: logit / p if > 0, else x p
  std::vector<std::pair<int64_t, double>> logit_bias;  ///< (token id, bias) added to the logit; -100 to 100
  int64_t min_tokens = 0;                              ///< the stop tokens cannot be drawn before this many tokens are

  bool any() const {
    return presence_penalty != 0 || frequency_penalty != 0 || repetition_penalty != 1 || !logit_bias.empty() ||
           min_tokens > 0;
  }
};

/// The most alternatives a drawn token's log probabilities come with (OpenAI's top_logprobs limit).
constexpr int64_t kMaxTopLogprobs = 20;

struct RequestOptions {
  /// Temperature, top-k, top-p, min-p and seed of this request (the vocabulary limit is the engine's).
  SamplingOptions sampling;
  int64_t max_new_tokens = 16;
  std::vector<int64_t> stop_tokens;  ///< the request ends after drawing one of these (it is kept)
  LogitControls controls;
  /// -1: no log probabilities; 0 to kMaxTopLogprobs: each drawn token's log probability and this many likeliest
  /// alternatives (TokenEvent::logprobs).
  int64_t logprobs = -1;
  /// What the output must follow (structured output); null: anything. Not with tensor-parallel serving.
  std::shared_ptr<TokenConstraint> constraint;
  /// The id of a request of the same prompt whose prompt's keys and values this one reuses (the n choices of one
  /// prompt): it waits until that request has computed its prompt, shares its full blocks and copies the last
  /// partial one, and computes only the prompt's last token. 0, an unknown id or another prompt: it computes its
  /// prompt itself (so do hybrid models, whose Mamba states move on, and tensor-parallel engines).
  int64_t prompt_of = 0;
};

/// The part of a request a refusal is about, so that each front end can name its own field or flag.
enum class RejectedPart {
  kPrompt,        ///< empty, an id outside the vocabulary, or too long for the context on its own
  kMaxNewTokens,  ///< the prompt fits, but not with that many new tokens
  kSampling,      ///< temperature, top-k, top-p, min-p, penalties, logit bias or logprobs out of range
  kCache,         ///< more positions than the whole cache holds
  kStepTokens,    ///< without chunked prefill, more tokens than one step takes
};

/// Why the engine refuses a request, in its own words: what is wrong (with the values) and what to change.
struct Rejection {
  std::string problem;
  std::string remedy;
  RejectedPart part = RejectedPart::kPrompt;

  std::string message() const { return problem + "; " + remedy; }
};

enum class FinishReason {
  kStopToken,  ///< drew one of its stop tokens
  kLength,     ///< drew max_new_tokens tokens
  kCancelled,  ///< cancel() was called
  kRejected,   ///< refused when added (the message says why)
};
const char* to_string(FinishReason reason);

/// Where a request stands with speculative decoding (infer/speculator.h).
struct SpeculationState {
  bool allowed = false;   ///< its options let it speculate (no logit controls, constraint or log probabilities)
  int64_t misses = 0;     ///< steps in a row whose verification kept no proposed token, or that had none to verify
  int64_t resume_at = 0;  ///< after misses it decodes plainly until it has drawn this many tokens
  int64_t pause = 0;      ///< the tokens of its next pause (it grows while proposals keep failing)
  int64_t proposed = 0;   ///< tokens proposed to it so far
  int64_t accepted = 0;   ///< of them, kept
  double recent_accepted = -1;  ///< tokens kept per verification lately (a moving average; -1: none yet)
  bool verifying = false;       ///< a verification of its proposals is on the device, unread
};

struct Request {
  int64_t id = 0;
  std::vector<int64_t> tokens;  ///< the prompt, then the tokens drawn so far
  int64_t prompt_length = 0;
  RequestOptions options;
  int64_t computed = 0;                ///< leading positions whose keys and values are in the cache or being computed
  std::vector<int64_t> blocks;         ///< cache blocks holding positions [i x block size, (i + 1) x block size)
  int64_t state_slot = 0;              ///< Mamba state slot (0: none held)
  int64_t preemptions = 0;             ///< times its blocks were taken back to let others run
  std::vector<uint64_t> block_hashes;  ///< prefix hashes of its full prompt blocks known to the prefix cache
  /// Tokens drawn by steps launched on the device and not read back yet (async scheduling: the next step
  /// is scheduled before the last one's tokens arrive, and reads them on the device).
  int64_t in_flight = 0;
  int64_t in_flight_row = 0;  ///< the row of the latest of them in its step's drawn tokens
  /// Its row of the logit control tables (infer/logit_controls.h) while it has controls; 0: none.
  int64_t control_slot = 0;
  bool min_tokens_reached = false;  ///< its stop tokens' ban was lifted (LogitControls::min_tokens)
  SpeculationState speculation;

  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_length; }
  /// Positions it has, the tokens in flight included.
  int64_t length() const { return static_cast<int64_t>(tokens.size()) + in_flight; }
  /// Tokens still to run through the model before the next one can be drawn.
  int64_t pending() const { return length() - computed; }
  /// Whether the tokens drawn and in flight reach its limit (it ends when they are read).
  bool drawn_all() const { return generated() + in_flight >= options.max_new_tokens; }
};

}  // namespace graphed::infer
