// config/fp8_rules.cpp — see config/fp8_rules.h.
#include "graphed/config/fp8_rules.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "graphed/config/run_config.h"

namespace graphed::config {
namespace {

std::string num(int64_t value) { return std::to_string(value); }

/// FP-1: FP8 runs on the fused bf16 path, over its working copies, and covers attention and MLP linears.
void validate_fp8_needs(const ModelConfig& m, IssueList& issues) {
  if (!m.bf16) {
    issues.error("FP-1", "--fp8-format " + *m.fp8_format +
                             " needs --bf16 (the weights' FP8 casts are made from bf16 working copies and the layers "
                             "between the FP8 GEMMs run in bf16); fix: add --bf16, or drop --fp8-format");
  } else if (!m.fused_kernels) {
    issues.error("FP-1", "--fp8-format " + *m.fp8_format +
                             " runs on graphed's fused kernels, but --no-fused-kernels turns them off; fix: drop "
                             "--no-fused-kernels, or drop --fp8-format");
  }
  if (m.has_mamba_layers()) {
    issues.error("FP-1", "--fp8-format " + *m.fp8_format + " does not cover Mamba layers yet (the pattern '" +
                             m.hybrid_override_pattern.value_or("") +
                             "' has M); fix: drop --fp8-format for hybrid models with Mamba layers");
  }
}

/// FP-2 (the recipe's settings) and FP-3 (bf16 first and last layers).
void validate_fp8_recipe(const ModelConfig& m, IssueList& issues) {
  if (m.fp8_margin < 0) {
    issues.error("FP-2", "--fp8-margin must be >= 0, got " + num(m.fp8_margin) + "; fix: pass 0 (the default) or more");
  }
  if (m.fp8_amax_history_len < 1) {
    issues.error("FP-2", "--fp8-amax-history-len must be >= 1, got " + num(m.fp8_amax_history_len) +
                             "; fix: pass 1 (the default) or more");
  }
  if (!m.first_last_layers_bf16) return;
  if (m.fp8_recipe == "delayed") {
    issues.error("FP-3",
                 "--first-last-layers-bf16 is not supported with --fp8-recipe delayed (Megatron's rule); fix: pass "
                 "--fp8-recipe tensorwise, or drop --first-last-layers-bf16");
  }
  if (m.num_layers_at_start_in_bf16 < 0 || m.num_layers_at_end_in_bf16 < 0) {
    issues.error("FP-3", "--num-layers-at-start-in-bf16 and --num-layers-at-end-in-bf16 must be >= 0, got " +
                             num(m.num_layers_at_start_in_bf16) + " and " + num(m.num_layers_at_end_in_bf16) +
                             "; fix: pass 0 or more");
  } else if (m.num_layers_at_start_in_bf16 + m.num_layers_at_end_in_bf16 >= m.num_layers) {
    issues.warn("FP-3", "--num-layers-at-start-in-bf16 " + num(m.num_layers_at_start_in_bf16) +
                            " and --num-layers-at-end-in-bf16 " + num(m.num_layers_at_end_in_bf16) + " cover all " +
                            num(m.num_layers) + " layers: no layer runs FP8 (lower them to train in FP8)");
  }
}

/// FP-4: every FP8 GEMM dimension a multiple of 16 (cuBLASLt's FP8 rule on Hopper), per tensor-parallel rank.
void validate_fp8_sizes(const RunConfig& config, IssueList& issues) {
  const ModelConfig& m = config.model;
  const int64_t tensor = std::max<int64_t>(1, config.train.tensor_model_parallel_size);
  const int64_t head = m.head_dim();
  const int64_t groups = m.num_query_groups.value_or(m.num_attention_heads);
  const int64_t ffn = m.ffn_hidden_size.value_or(4 * m.hidden_size);
  std::vector<std::pair<std::string, int64_t>> sizes{
      {"--hidden-size " + num(m.hidden_size), m.hidden_size},
      {"the attention output (heads " + num(m.num_attention_heads) + " x head size " + num(head) + " / " + num(tensor) +
           " tensor ranks)",
       m.num_attention_heads * head / tensor},
      {"the QKV projection ((heads " + num(m.num_attention_heads) + " + 2 x " + num(groups) + " query groups) x " +
           num(head) + " / " + num(tensor) + " tensor ranks)",
       (m.num_attention_heads + 2 * groups) * head / tensor},
      {"--ffn-hidden-size " + num(ffn) + " / " + num(tensor) + " tensor ranks", ffn / tensor}};
  if (m.is_moe() && m.moe_shared_expert_intermediate_size) {
    sizes.emplace_back("--moe-shared-expert-intermediate-size " + num(*m.moe_shared_expert_intermediate_size) + " / " +
                           num(tensor) + " tensor ranks",
                       *m.moe_shared_expert_intermediate_size / tensor);
  }
  if (m.fp8_wgrad) {
    const int64_t tokens = config.train.micro_batch_size * m.seq_length;
    sizes.emplace_back("the tokens of a microbatch (--micro-batch-size " + num(config.train.micro_batch_size) +
                           " x --seq-length " + num(m.seq_length) + ", the FP8 weight gradients' inner size)",
                       tokens);
  }
  for (const auto& [what, size] : sizes) {
    if (size % 16 == 0) continue;
    issues.error("FP-4", "--fp8-format needs every FP8 GEMM size a multiple of 16 (Hopper's FP8 tensor cores), but " +
                             what + " is " + num(size) + "; fix: change that size to a multiple of 16" +
                             (what.rfind("the tokens", 0) == 0 ? ", or pass --no-fp8-wgrad" : "") +
                             ", or drop --fp8-format");
  }
}

}  // namespace

void validate_fp8(const RunConfig& config, IssueList& issues) {
  const ModelConfig& m = config.model;
  if (!m.fp8()) return;
  validate_fp8_needs(m, issues);
  validate_fp8_recipe(m, issues);
  validate_fp8_sizes(config, issues);
  if (m.is_moe()) {
    issues.note("FP-5", "--fp8-format " + *m.fp8_format +
                            ": the MoE experts and router stay in bf16 (only attention, dense MLP and shared-expert "
                            "linears run FP8)");
  }
}

}  // namespace graphed::config
