// config/hybrid_pattern.cpp — see config/hybrid_pattern.h. Python's round() rounds halves to even, and
// so does std::nearbyint in the default rounding mode: the counts match Megatron's.
#include "graphed/config/hybrid_pattern.h"

#include <algorithm>
#include <cmath>

#include "graphed/util/error.h"

namespace graphed::config {
namespace {

constexpr char kMamba = 'M', kAttention = '*', kMlp = '-', kMoe = 'E';

int64_t rounded_count(int64_t layers, double ratio) {
  return static_cast<int64_t>(std::nearbyint(static_cast<double>(layers) * ratio));
}

[[noreturn]] void refuse(const std::string& message) { throw ConfigError(message, {message}); }

/// Marks `count` of the layers that are `from` as `to`, evenly: a running budget of `from` layers per
/// marked one, starting full.
void spread(std::string& layers, char from, char to, int64_t count, double per_marked) {
  if (count == 0) return;
  double budget = per_marked;
  for (char& layer : layers) {
    if (layer != from) continue;
    if (budget < 0.5) {
      layer = to;
      budget += per_marked;
    } else {
      budget -= 1.0;
    }
  }
}

std::string allocate_by_ratios(int64_t num_layers, double attention_ratio, double mlp_ratio) {
  std::string layers(static_cast<std::size_t>(num_layers), kMamba);
  const int64_t attention = rounded_count(num_layers, attention_ratio);
  int64_t mamba = num_layers - attention;
  spread(layers, kMamba, kAttention, attention, static_cast<double>(mamba) / static_cast<double>(attention + 1));
  const int64_t mlp = rounded_count(num_layers, mlp_ratio);
  if (mlp > 0) {
    mamba -= mlp;
    spread(layers, kMamba, kMlp, mlp, static_cast<double>(mamba) / static_cast<double>(mlp));
  }
  return layers;
}

void check_pattern(const std::string& pattern, int64_t num_layers) {
  if (pattern.find('/') != std::string::npos) {
    refuse("--hybrid-override-pattern '" + pattern +
           "' has a multi-token-prediction part ('/'), which graphed "
           "does not train; fix: give the decoder's pattern alone");
  }
  for (const char symbol : pattern) {
    if (symbol != kMamba && symbol != kAttention && symbol != kMlp && symbol != kMoe) {
      refuse("--hybrid-override-pattern '" + pattern + "' has '" + std::string(1, symbol) +
             "', which is no layer kind; fix: use M (Mamba), * (attention), - (MLP) and E (MoE) only");
    }
  }
  if (static_cast<int64_t>(pattern.size()) != num_layers) {
    refuse("--hybrid-override-pattern '" + pattern + "' has " + std::to_string(pattern.size()) +
           " layers, but "
           "--num-layers is " +
           std::to_string(num_layers) + "; fix: one symbol per layer");
  }
}

}  // namespace

std::string allocate_hybrid_layers(int64_t num_layers, double attention_ratio, double mlp_ratio,
                                   const std::optional<std::string>& override_pattern) {
  GRAPHED_INTERNAL_ASSERT(num_layers > 0, "num_layers ", num_layers);
  if (attention_ratio < 0.0 || attention_ratio > 1.0 || mlp_ratio < 0.0 || mlp_ratio > 1.0 ||
      attention_ratio + mlp_ratio > 1.0) {
    refuse("--hybrid-attention-ratio " + std::to_string(attention_ratio) + " and --hybrid-mlp-ratio " +
           std::to_string(mlp_ratio) +
           " must each be in [0, 1] with a sum of at most 1 (Mamba layers take the "
           "rest); fix: e.g. --hybrid-attention-ratio 0.25 --hybrid-mlp-ratio 0.25");
  }
  const std::string by_ratios = allocate_by_ratios(num_layers, attention_ratio, mlp_ratio);
  if (!override_pattern) return by_ratios;
  check_pattern(*override_pattern, num_layers);
  const auto counts_match = [&](char kind) {
    return std::count(by_ratios.begin(), by_ratios.end(), kind) ==
           std::count(override_pattern->begin(), override_pattern->end(), kind);
  };
  const bool ratios_given = attention_ratio > 0.0 || mlp_ratio > 0.0;
  if (ratios_given && !(counts_match(kMamba) && counts_match(kAttention) && counts_match(kMlp) && counts_match(kMoe))) {
    refuse("--hybrid-override-pattern '" + *override_pattern + "' does not have the layer counts the ratios give ('" +
           by_ratios + "'); fix: match the counts, or leave the ratios at 0 with a pattern");
  }
  return *override_pattern;
}

}  // namespace graphed::config
