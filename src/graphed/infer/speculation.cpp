// infer/speculation.cpp — see infer/speculation.h.
#include "graphed/infer/speculation.h"

#include <algorithm>

#include "graphed/util/error.h"

namespace graphed::infer {

std::vector<int64_t> propose_by_lookup(const std::vector<int64_t>& tokens, const NgramLookup& lookup) {
  const auto length = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min(lookup.longest, length - 1); n >= std::max<int64_t>(lookup.shortest, 1); --n) {
    const auto suffix = tokens.end() - n;
    // The latest earlier occurrence: starts from length - n - 1 down to 0, so that it ends before the suffix does.
    for (int64_t start = length - n - 1; start >= 0; --start) {
      if (!std::equal(suffix, tokens.end(), tokens.begin() + start)) continue;
      const int64_t first = start + n;
      const int64_t count = std::min(lookup.tokens, length - first);
      return {tokens.begin() + first, tokens.begin() + first + count};
    }
  }
  return {};
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
