// config/hybrid_rules.cpp — see config/hybrid_rules.h.
#include "graphed/config/hybrid_rules.h"

#include <algorithm>

#include "graphed/config/hybrid_pattern.h"
#include "graphed/config/run_config.h"
#include "graphed/util/error.h"

namespace graphed::config {
namespace {

std::string num(int64_t value) { return std::to_string(value); }

int64_t count_of(const std::string& pattern, char kind) {
  return static_cast<int64_t>(std::count(pattern.begin(), pattern.end(), kind));
}

void validate_experts(const ModelConfig& m, const std::string& pattern, IssueList& issues) {
  const int64_t moe_layers = count_of(pattern, 'E');
  if (moe_layers > 0 && !m.is_moe()) {
    issues.error("HY-3", "--hybrid-override-pattern '" + pattern + "' has " + num(moe_layers) +
                             " MoE layer(s) (E), but --num-experts is " +
                             (m.num_experts ? num(*m.num_experts) : std::string("unset")) +
                             "; fix: set --num-experts 2 or more, or replace E with - (a dense MLP layer)");
  } else if (moe_layers == 0 && m.num_experts) {
    issues.warn("HY-3", "--num-experts " + num(*m.num_experts) + " has no effect: the hybrid pattern '" + pattern +
                            "' has no MoE layer (E); ignored (put E in --hybrid-override-pattern to use experts)");
  }
}

void validate_mamba_shape(const ModelConfig& m, IssueList& issues) {
  for (const auto& [flag, value] : {std::pair<std::string, int64_t>{"--mamba-state-dim", m.mamba_state_dim},
                                    {"--mamba-head-dim", m.mamba_head_dim},
                                    {"--mamba-num-groups", m.mamba_num_groups},
                                    {"--mamba-num-heads", m.mamba_num_heads.value_or(1)},
                                    {"--mamba-conv-width", m.mamba_conv_width},
                                    {"--mamba-chunk-size", m.mamba_chunk_size}}) {
    if (value < 1) issues.error("HY-4", flag + " must be >= 1, got " + num(value) + "; fix: pass a positive value");
  }
  if (m.mamba_state_dim < 1 || m.mamba_head_dim < 1 || m.mamba_num_groups < 1 || m.mamba_num_heads.value_or(1) < 1)
    return;
  if (!m.mamba_num_heads && (2 * m.hidden_size) % m.mamba_head_dim != 0) {
    issues.error("HY-4", "the Mamba inner size 2 x --hidden-size = " + num(2 * m.hidden_size) +
                             " is not a multiple of --mamba-head-dim " + num(m.mamba_head_dim) +
                             "; fix: pass a head dim that divides it, or set --mamba-num-heads");
    return;
  }
  const int64_t heads = m.mamba_num_heads.value_or(2 * m.hidden_size / m.mamba_head_dim);
  if (heads % m.mamba_num_groups != 0) {
    issues.error("HY-4", "the " + num(heads) + " Mamba heads do not split into --mamba-num-groups " +
                             num(m.mamba_num_groups) + "; fix: pass a group count that divides " + num(heads));
  }
}

/// HY-6: Mamba settings changed from their defaults on a model without Mamba layers.
void warn_unused_mamba_settings(const ModelConfig& m, IssueList& issues) {
  const ModelConfig defaults;
  std::vector<std::string> unused;
  if (m.mamba_state_dim != defaults.mamba_state_dim) unused.push_back("--mamba-state-dim");
  if (m.mamba_head_dim != defaults.mamba_head_dim) unused.push_back("--mamba-head-dim");
  if (m.mamba_num_groups != defaults.mamba_num_groups) unused.push_back("--mamba-num-groups");
  if (m.mamba_num_heads) unused.push_back("--mamba-num-heads");
  if (m.mamba_conv_width != defaults.mamba_conv_width) unused.push_back("--mamba-conv-width");
  if (m.mamba_chunk_size != defaults.mamba_chunk_size) unused.push_back("--mamba-chunk-size");
  for (const auto& flag : unused) {
    issues.warn("HY-6",
                flag + " has no effect: the model has no Mamba layers (M in --hybrid-override-pattern); ignored");
  }
}

}  // namespace

void resolve_hybrid_layers(RunConfig& config, IssueList& issues) {
  ModelConfig& m = config.model;
  const bool given = m.hybrid_override_pattern || m.hybrid_attention_ratio != 0.0 || m.hybrid_mlp_ratio != 0.0;
  if (given && !m.is_hybrid_model) {
    m.is_hybrid_model = true;
    issues.note("HY-1",
                "--hybrid-override-pattern or a hybrid ratio makes this a Mamba-hybrid model; "
                "--is-hybrid-model is turned on");
  }
  if (!m.is_hybrid_model || m.num_layers < 1) return;
  try {
    m.hybrid_override_pattern =
        allocate_hybrid_layers(m.num_layers, m.hybrid_attention_ratio, m.hybrid_mlp_ratio, m.hybrid_override_pattern);
  } catch (const ConfigError& error) {
    issues.error("HY-2", error.what());
    return;
  }
  config.moe_layers.clear();
  for (const char symbol : *m.hybrid_override_pattern) config.moe_layers.push_back(symbol == 'E');
}

void validate_hybrid(const RunConfig& config, IssueList& issues) {
  const ModelConfig& m = config.model;
  if (!m.has_mamba_layers()) warn_unused_mamba_settings(m, issues);
  if (!m.is_hybrid_model || !m.hybrid_override_pattern) return;
  validate_experts(m, *m.hybrid_override_pattern, issues);
  validate_mamba_shape(m, issues);
  if (m.moe_layer_freq != "1") {
    issues.warn("HY-5", "--moe-layer-freq " + m.moe_layer_freq +
                            " has no effect on a hybrid model, whose MoE layers "
                            "are the E layers of --hybrid-override-pattern; ignored");
  }
}

}  // namespace graphed::config
