// infer/speculation.cpp — see infer/speculation.h.
#include "graphed/infer/speculation.h"

#include <algorithm>

#include "graphed/util/error.h"

namespace graphed::infer {

const char* to_string(SpeculativeDecoding::Method method) {
  switch (method) {
    case SpeculativeDecoding::Method::kNone: return "none";
    case SpeculativeDecoding::Method::kNgram: return "ngram";
    case SpeculativeDecoding::Method::kDraftModel: return "draft_model";
  }
  return "none";
}

std::vector<std::vector<int64_t>> LookupProposer::propose(const std::vector<Ask>& asks) {
  std::vector<std::vector<int64_t>> proposals;
  proposals.reserve(asks.size());
  for (const Ask& ask : asks) {
    NgramLookup lookup = lookup_;
    lookup.tokens = ask.limit;  // at most num_speculative_tokens (Speculator::proposal_limit)
    proposals.push_back(lookup.tokens > 0 ? propose_by_lookup(ask.request->tokens, lookup) : std::vector<int64_t>{});
  }
  return proposals;
}

bool LookupProposer::worth_waiting(const Request& request) const {
  NgramLookup lookup = lookup_;
  lookup.tokens = 1;
  return !propose_by_lookup(request.tokens, lookup).empty();
}

std::vector<int64_t> propose_by_lookup(const std::vector<int64_t>& tokens, const NgramLookup& lookup) {
  const auto length = static_cast<int64_t>(tokens.size());
  const int64_t longest = std::min(lookup.longest, length - 1);
  const int64_t shortest = std::max<int64_t>(lookup.shortest, 1);
  // One pass over the earlier positions, latest first: at each, how many tokens ending there equal the sequence's
  // last ones (at most `longest`). The longest such match wins, the latest among equals; a full one ends the search.
  int64_t best_length = 0;
  int64_t best_end = -1;  // the last position of the best earlier occurrence
  for (int64_t end = length - 2; end >= 0 && best_length < longest; --end) {
    int64_t matched = 0;
    while (matched < longest && matched <= end &&
           tokens[static_cast<std::size_t>(end - matched)] == tokens[static_cast<std::size_t>(length - 1 - matched)]) {
      ++matched;
    }
    if (matched > best_length) {
      best_length = matched;
      best_end = end;
    }
  }
  if (best_length < shortest) return {};
  const int64_t first = best_end + 1;
  const int64_t count = std::min(lookup.tokens, length - first);
  return {tokens.begin() + first, tokens.begin() + first + count};
}

Verdict verify_greedy(const std::vector<int64_t>& proposals, const std::vector<int64_t>& target_argmax) {
  GRAPHED_INTERNAL_ASSERT(target_argmax.size() == proposals.size() + 1, "a verification of ", proposals.size(),
                          " proposals with ", target_argmax.size(), " target tokens");
  Verdict verdict;
  while (verdict.accepted < static_cast<int64_t>(proposals.size()) &&
         proposals[static_cast<std::size_t>(verdict.accepted)] ==
             target_argmax[static_cast<std::size_t>(verdict.accepted)]) {
    ++verdict.accepted;
  }
  verdict.next_token = target_argmax[static_cast<std::size_t>(verdict.accepted)];
  return verdict;
}

int64_t pick(const Distribution& weights, double uniform) {
  double total = 0;
  for (const double weight : weights) total += std::max(weight, 0.0);
  GRAPHED_INTERNAL_ASSERT(total > 0, "a draw from weights that sum to ", total);
  const double target = uniform * total;
  double sum = 0;
  int64_t last_positive = 0;
  for (std::size_t token = 0; token < weights.size(); ++token) {
    if (weights[token] <= 0) continue;
    last_positive = static_cast<int64_t>(token);
    sum += weights[token];
    if (target < sum) return last_positive;
  }
  return last_positive;  // rounding: the last token that has any weight
}

Verdict verify_sampled(const std::vector<int64_t>& proposals, const std::vector<Distribution>& target,
                       const std::vector<Distribution>& draft, const std::vector<double>& accept_draws,
                       double final_draw) {
  const std::size_t count = proposals.size();
  GRAPHED_INTERNAL_ASSERT(
      target.size() == count + 1 && accept_draws.size() >= count && (draft.empty() || draft.size() == count),
      "a verification of ", count, " proposals with ", target.size(), " target and ", draft.size(),
      " draft distributions");
  Verdict verdict;
  for (std::size_t i = 0; i < count; ++i) {
    const auto token = static_cast<std::size_t>(proposals[i]);
    const double p = target[i][token];
    const double q = draft.empty() ? 1.0 : draft[i][token];
    if (q > 0 && accept_draws[i] < std::min(1.0, p / q)) {
      ++verdict.accepted;
      continue;
    }
    Distribution residual(target[i].size());
    for (std::size_t t = 0; t < residual.size(); ++t) {
      const double proposed = draft.empty() ? (t == token ? 1.0 : 0.0) : draft[i][t];
      residual[t] = std::max(0.0, target[i][t] - proposed);
    }
    verdict.next_token = pick(residual, final_draw);
    return verdict;
  }
  verdict.next_token = pick(target[count], final_draw);
  return verdict;
}

}  // namespace graphed::infer
