// infer/speculation.h — the host-side pieces of speculative decoding (issue 46), torch-free: proposing tokens by
// prompt lookup (vLLM's "ngram" method: the tokens that followed an earlier occurrence of the request's latest
// n-gram), and deciding which proposed tokens the target model accepts: greedily (the longest prefix equal to the
// target's argmax) or by rejection sampling (Leviathan et al. 2023, Chen et al. 2023), under which the tokens drawn
// follow the target's distribution exactly whatever was proposed. The engine's verification step will apply the
// same rules on the device; these are their reference.
#pragma once

#include <cstdint>
#include <vector>

namespace graphed::infer {

/// vLLM's --speculative-config for method "ngram".
struct NgramLookup {
  int64_t tokens = 0;    ///< num_speculative_tokens: the most tokens proposed
  int64_t longest = 0;   ///< prompt_lookup_max: the longest n-gram looked up
  int64_t shortest = 1;  ///< prompt_lookup_min: the shortest
};

/// The most tokens one verification proposes (num_speculative_tokens).
constexpr int64_t kMaxSpeculativeTokens = 16;

/// How the serving engine speculates: not at all, or by prompt lookup.
struct SpeculativeDecoding {
  enum class Method { kNone, kNgram };
  Method method = Method::kNone;
  NgramLookup lookup;

  bool enabled() const { return method != Method::kNone; }
  /// The most tokens a request proposes in one step (0 without speculation).
  int64_t tokens() const { return enabled() ? lookup.tokens : 0; }
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
