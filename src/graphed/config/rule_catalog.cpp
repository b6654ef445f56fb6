// config/rule_catalog.cpp — every config rule's id and one line on what it checks, in the order check-config and
// docs/configuration.md list them (config/validation.h's all_rules). The checks themselves live beside their kind.
#include <vector>

#include "graphed/config/validation.h"

namespace graphed::config {

namespace {

/// The CUDA-graph rules (migration, normalization, capture regions), the hybrid rules and the
/// recomputation-under-graphs rules, in all_rules' order.
std::vector<RuleInfo> graph_and_hybrid_rules() {
  return {
      {"M1", "--enable-cuda-graph migrates to --cuda-graph-impl local (warning)"},
      {"M2", "--external-cuda-graph migrates to --cuda-graph-impl transformer_engine (warning)"},
      {"M3", "--cuda-graph-scope migrates to --cuda-graph-modules (warning)"},
      {"M4", "modules value full migrates to an empty list, the whole layer (warning)"},
      {"M5", "modules value full_iteration migrates to --cuda-graph-impl full_iteration (warning)"},
      {"M6", "modules value full_iteration_inference migrates to --inference-cuda-graph-scope block (warning)"},
      {"M7", "full_iteration_inference with --cuda-graph-impl none is ignored (warning)"},
      {"TC-1", "a deprecated boolean flag with --cuda-graph-impl other than none"},
      {"TC-2", "--enable-cuda-graph together with --external-cuda-graph"},
      {"TC-3", "--cuda-graph-scope together with --cuda-graph-modules"},
      {"TC-4", "unknown --cuda-graph-impl"},
      {"N1", "full combined with other module values"},
      {"N2", "full_iteration and full_iteration_inference together"},
      {"N3", "full_iteration with --cuda-graph-impl transformer_engine"},
      {"N4", "full_iteration with an inference scope other than none"},
      {"N5", "full_iteration_inference with --cuda-graph-impl transformer_engine or full_iteration"},
      {"N6", "full_iteration_inference with an inference scope other than block"},
      {"N7", "unknown module value"},
      {"TC-5", "inference scope not allowed for the impl (only local has layer/block)"},
      {"TC-6", "--cuda-graph-impl full_iteration with modules"},
      {"BR-1", "modules with --cuda-graph-impl none are ignored (warning)"},
      {"TC-8", "local graphs moe_router and moe_preprocess together; the missing one is added (note)"},
      {"VA-9", "--te-rng-tracker given: graphed's graphs are always graph-safe (note)"},
      {"VA-6", "NaN check stays allowed with full_iteration: it is device-side and deferred (note)"},
      {"VA-8", "local impl needs --inference-dynamic-batching-num-cuda-graphs > 0 or -1"},
      {"G1", "--cuda-graph-warmup-steps >= 1"},
      {"G2", "whole-layer capture of dropless MoE layers without --moe-grouped-gemm (dynamic shapes)"},
      {"G3", "full_iteration with dropless MoE layers without --moe-grouped-gemm (dynamic shapes)"},
      {"G4", "mamba module without Mamba layers"},
      {"G6", "graphs over dropless MoE layers under expert parallelism (the received counts are read on the host)"},
      {"G7",
       "CUDA graphs with --moe-expert-rank-capacity-factor under expert parallelism: the overflow check and rerun run "
       "after the graphs (note)"},
      {"HY-1", "a hybrid pattern or ratio turns --is-hybrid-model on (note)"},
      {"HY-2", "hybrid pattern or ratios invalid (symbols, length, counts, ranges)"},
      {"HY-3", "E layers need --num-experts; experts without E layers are unused (warning)"},
      {"HY-4", "Mamba shape: positive sizes, heads times head dim, heads split into groups"},
      {"HY-5", "--moe-layer-freq has no effect on a hybrid model (warning)"},
      {"HY-6", "Mamba settings on a model without Mamba layers have no effect (warning)"},
      {"G5", "--optimizer-cuda-graph with --cuda-graph-impl none"},
      {"TC-9", "moe and moe_router together"},
      {"TC-10", "moe_preprocess without moe_router"},
      {"TC-11", "moe or moe_router on a dense model"},
      {"TC-12", "mlp when every layer is MoE"},
      {"TC-13", "moe without drop-and-pad"},
      {"TC-14", "moe_preprocess with alltoall, a capacity factor and no padding (host sync)"},
      {"TC-15", "full recompute with an impl other than full_iteration"},
      {"TC-16", "selective moe recompute with moe_router under transformer_engine"},
      {"TC-17", "attention dropout with core_attn recomputed inside a graph"},
      {"TC-18", "hidden dropout with mlp/moe recomputed inside a graph"},
  };
}

/// The model, float, training, parallel-layout and FP8 rules, in all_rules' order.
std::vector<RuleInfo> model_and_run_rules() {
  return {
      {"MC-1", "sizes and counts must be positive"},
      {"MC-2", "hidden size divisible by attention heads"},
      {"MC-3", "attention heads divisible by query groups"},
      {"MC-4", "RoPE needs an even head size"},
      {"MC-5", "top-k between 1 and the expert count"},
      {"MC-6", "padding to capacity needs a capacity factor"},
      {"MC-7", "capacity factor > 0"},
      {"MC-8", "--moe-layer-freq is an integer or a per-layer 0/1 list"},
      {"MC-9", "dropout in [0, 1)"},
      {"MC-10", "sequence length within learned position embeddings"},
      {"MC-11", "--num-query-groups without --group-query-attention is ignored (warning)"},
      {"MC-12", "MoE settings on a dense model are ignored (warning)"},
      {"MC-13", "full recompute needs --recompute-method"},
      {"MC-14", "--num-experts >= 2"},
      {"MC-15", "--rotary-base > 0"},
      {"MC-16", "--moe-aux-loss-coeff >= 0"},
      {"MC-17", "--rope-scaling-factor > 0"},
      {"MC-18", "--use-rope-scaling without RoPE is ignored (warning)"},
      {"MC-19", "--openai-gelu with --swiglu is ignored (warning)"},
      {"MC-20", "RoPE with --seq-length past --max-position-embeddings: the context becomes --seq-length (note)"},
      {"MC-21", "--moe-shared-expert-gate needs a shared expert"},
      {"MC-23", "--moe-expert-rank-capacity-factor > 0"},
      {"MC-24", "--moe-expert-rank-capacity-factor needs dropless grouped experts"},
      {"MC-25", "--moe-expert-rank-capacity-factor without expert parallelism is ignored (warning)"},
      {"MC-26", "--moe-expert-rank-capacity-factor with FP8's delayed recipe (not supported)"},
      {"MC-27", "--moe-paged-stash needs --moe-expert-rank-capacity-factor"},
      {"MC-28", "--moe-paged-stash-page-size >= 1 and --moe-paged-stash-buffer-size-factor-cuda not 0"},
      {"MC-29", "--moe-paged-stash without expert parallelism is ignored (warning)"},
      {"MC-22", "--qk-layernorm-across-heads without --qk-layernorm is ignored (warning)"},
      {"FL-1", "every float setting is a finite number (no nan, inf or overflow)"},
      {"TR-1", "batch sizes, iterations and intervals must be positive"},
      {"TR-2", "global batch a multiple of micro batch x data-parallel size"},
      {"TR-3", "0 <= --min-lr <= --lr"},
      {"TR-4", "warmup within the decay"},
      {"TR-5", "--mock-data and --data-path are exclusive"},
      {"TR-6", "--save-interval needs --save"},
      {"TR-7", "--split format"},
      {"TR-8", "AdamW settings in range"},
      {"TR-9", "sampling settings >= 0, a prompt to continue"},
      {"PL-1", "parallel sizes and the timeout positive"},
      {"PL-2", "the launch's process count a multiple of tensor x pipeline size, equal to x data-parallel size"},
      {"PL-3", "layers divisible by pipeline stages"},
      {"PL-4", "virtual pipeline stages need 2 or more pipeline stages"},
      {"PL-5", "layers per virtual stage divide the layers of a stage"},
      {"PL-6", "full_iteration with pipeline parallelism (not supported)"},
      {"PL-7",
       "tensor parallelism: heads, query groups, ffn size, Mamba heads and groups and vocabulary divide "
       "by the tensor size"},
      {"PL-9", "--sequence-parallel without tensor parallelism is ignored (note)"},
      {"PL-10", "dropout under tensor parallelism draws from the model-parallel random states (note)"},
      {"PL-11", "no training samples under --sequence-parallel (note)"},
      {"PL-12", "q/k norms across heads are not split over tensor-parallel ranks"},
      {"PL-13", "expert parallelism needs MoE layers"},
      {"PL-14", "the experts divide by the expert-parallel size"},
      {"PL-15", "the expert-parallel size divides the data-parallel size (with whole experts, a stage's ranks)"},
      {"PL-16", "expert with tensor parallelism but no --sequence-parallel, which Megatron refuses (note)"},
      {"PL-17", "--expert-tensor-parallel-size is the tensor size or 1, and 1 needs expert parallelism"},
      {"PL-18", "expert parallelism exchanges tokens all-to-all whichever dispatcher is named (note)"},
      {"PL-20", "--expert-tensor-parallel-size 1 with tensor parallelism needs --sequence-parallel"},
      {"PL-21", "--use-distributed-optimizer with one data-parallel rank shards nothing (note)"},
      {"PL-22", "--overlap-param-gather needs --use-distributed-optimizer and --overlap-grad-reduce"},
      {"PL-23", "--overlap-param-gather only for dense models under none or full_iteration, without PP or FP8"},
      {"PL-24", "--overlap-param-gather without bf16 working copies has no effect (note)"},
      {"PL-25", "--grad-reduce-in-bf16 needs --bf16"},
      {"PL-26", "--grad-reduce-in-bf16 with one data-parallel rank reduces nothing (note)"},
      {"FP-1", "--fp8-format needs --bf16 with the fused kernels, and no Mamba layers"},
      {"FP-2", "--fp8-margin >= 0 and --fp8-amax-history-len >= 1"},
      {"FP-3", "--first-last-layers-bf16: tensorwise recipe only; layer counts >= 0 (warning: all layers bf16)"},
      {"FP-4", "FP8 GEMM sizes (hidden, attention, QKV, ffn per tensor rank; microbatch tokens) multiples of 16"},
      {"FP-5", "MoE experts and router stay bf16 under FP8 (note)"},
  };
}

}  // namespace

const std::vector<RuleInfo>& all_rules() {
  static const std::vector<RuleInfo> rules = [] {
    std::vector<RuleInfo> all = graph_and_hybrid_rules();
    const std::vector<RuleInfo> rest = model_and_run_rules();
    all.insert(all.end(), rest.begin(), rest.end());
    return all;
  }();
  return rules;
}

}  // namespace graphed::config
