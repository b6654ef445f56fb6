// infer/speculation.h — the host-side pieces of speculative decoding (issue 46), torch-free: how the engine
// speculates (the method and what proposes), proposing tokens by prompt lookup (vLLM's "ngram" method: the tokens
// that followed an earlier occurrence of the request's latest n-gram), and deciding which proposed tokens the target
// model accepts: greedily (the longest prefix equal to the target's argmax) or by rejection sampling (Leviathan et
// al. 2023, Chen et al. 2023), under which the tokens drawn follow the target's distribution exactly whatever was
// proposed. The engine keeps a proposal exactly where the target drew it (verify_greedy's rule, sampled draws too);
// verify_sampled is the reference for drafts drawn from a distribution, which the engine does not propose yet.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graphed/infer/request.h"

namespace graphed::infer {

/// vLLM's --speculative-config for method "ngram" (prompt_lookup_max and _min), and how many tokens one lookup
/// proposes at most.
struct NgramLookup {
  int64_t tokens = 0;    ///< the most tokens proposed
  int64_t longest = 0;   ///< prompt_lookup_max: the longest n-gram looked up
  int64_t shortest = 1;  ///< prompt_lookup_min: the shortest
};

/// The most tokens one verification proposes (num_speculative_tokens).
constexpr int64_t kMaxSpeculativeTokens = 16;

/// What a proposer did so far: calls, and a draft model's steps (eager ones among them) and host time.
struct ProposerWork {
  int64_t rounds = 0;
  int64_t steps = 0;
  int64_t eager_steps = 0;
  double seconds = 0;
};

/// What proposes the tokens a step verifies, for the speculating requests of one step at once.
class Proposer {
 public:
  virtual ~Proposer() = default;
  /// A request to propose for, and the most tokens it takes.
  struct Ask {
    const Request* request = nullptr;
    int64_t limit = 0;
  };
  /// For each ask, up to its limit of tokens to follow its request's tokens (every one of them read); fewer or none
  /// where the proposer has nothing to offer.
  virtual std::vector<std::vector<int64_t>> propose(const std::vector<Ask>& asks) = 0;
  /// Whether a request with a token in flight should wait for it (sit out a step) to propose next.
  virtual bool worth_waiting(const Request& request) const = 0;
  virtual ProposerWork work() const { return {}; }
};

/// How the serving engine speculates: not at all, by prompt lookup, or with a draft model.
struct SpeculativeDecoding {
  enum class Method { kNone, kNgram, kDraftModel };
  Method method = Method::kNone;
  int64_t num_tokens = 0;   ///< num_speculative_tokens: the most tokens a request proposes a step
  NgramLookup lookup;       ///< kNgram: the n-grams looked up
  std::string draft_model;  ///< kDraftModel: where the draft came from (for reports)
  /// kDraftModel: the draft's proposer (infer/draft_proposer.h), built by the caller; shared by the engine's copies
  /// of these settings.
  std::shared_ptr<Proposer> draft;
  /// Speculation turns itself off while steps without it draw more tokens a second (infer/speculation_governor.h);
  /// false: every request that may speculate does (tests of the mechanics).
  bool governed = true;

  bool enabled() const { return method != Method::kNone; }
  /// The most tokens a request proposes in one step (0 without speculation).
  int64_t tokens() const { return enabled() ? num_tokens : 0; }
};
/// "ngram", "draft_model" or "none" (vLLM's names).
const char* to_string(SpeculativeDecoding::Method method);

/// Proposes by prompt lookup: each request's own earlier tokens (propose_by_lookup).
class LookupProposer final : public Proposer {
 public:
  explicit LookupProposer(NgramLookup lookup) : lookup_(lookup) {}
  std::vector<std::vector<int64_t>> propose(const std::vector<Ask>& asks) override;
  /// Only where its tokens end in an n-gram that occurred before: otherwise it has nothing to propose.
  bool worth_waiting(const Request& request) const override;

 private:
  NgramLookup lookup_;
};

/// The tokens that followed the latest earlier occurrence of the longest suffix of `tokens` (from lookup.longest
/// down to lookup.shortest tokens) that occurs earlier, at most lookup.tokens of them (fewer where the sequence
/// ends first); empty when no such suffix recurs.
std::vector<int64_t> propose_by_lookup(const std::vector<int64_t>& tokens, const NgramLookup& lookup);

/// What a verification decides: how many proposed tokens are kept, and the token drawn after them (the target's
/// own: a correction where a proposal was refused, else the one after the last proposal).
struct Verdict {
  int64_t accepted = 0;
  int64_t next_token = 0;
};

/// Greedy: the proposals kept while each equals the target's argmax at its position; `target_argmax` holds
/// proposals.size() + 1 tokens (the argmax after each proposal and after the last).
Verdict verify_greedy(const std::vector<int64_t>& proposals, const std::vector<int64_t>& target_argmax);

/// A probability distribution over the vocabulary.
using Distribution = std::vector<double>;

/// Rejection sampling: proposal i is kept with probability min(1, p_i(x) / q_i(x)) (uniform `accept_draws[i]`); at
/// the first refusal the next token is drawn from max(0, p_i - q_i), normalised (uniform `final_draw`); when every
/// proposal is kept, from p_K. `target`: proposals.size() + 1 distributions. `draft`: the proposer's distributions
/// at each proposal, or empty for a proposer that picks its tokens outright (prompt lookup: q_i puts all its mass on
/// proposal i). The drawn tokens then follow the target's distribution, whatever was proposed.
Verdict verify_sampled(const std::vector<int64_t>& proposals, const std::vector<Distribution>& target,
                       const std::vector<Distribution>& draft, const std::vector<double>& accept_draws,
                       double final_draw);

/// The token a uniform draw in [0, 1) picks from `weights` (not necessarily normalised; at least one positive) by
/// their cumulative sum.
int64_t pick(const Distribution& weights, double uniform);

}  // namespace graphed::infer
