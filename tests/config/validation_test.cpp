// tests/config/validation_test.cpp — every validation rule fires with its exact message on a
// configuration that breaks it, and stays quiet on a near miss.
#include "graphed/config/validation.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "graphed/config/run_config.h"
#include "graphed/util/error.h"

namespace graphed::config {
namespace {

using nlohmann::json;

Resolution resolve_json(const json& overrides) {
  Settings settings;
  apply_settings(settings, overrides, "test");
  return resolve_run_config(settings);
}

struct FiringCase {
  std::string name;
  json settings;
  std::string rule;
  Severity severity;
  std::string message;
};

void PrintTo(const FiringCase& c, std::ostream* out) { *out << c.name; }

class RuleFiresTest : public ::testing::TestWithParam<FiringCase> {};

TEST_P(RuleFiresTest, WithItsExactMessage) {
  const FiringCase& c = GetParam();
  const auto& rules = all_rules();
  EXPECT_TRUE(std::any_of(rules.begin(), rules.end(), [&](const RuleInfo& r) { return r.id == c.rule; }))
      << c.rule << " is missing from all_rules()";
  const Resolution resolution = resolve_json(c.settings);
  std::string seen;
  for (const auto& issue : resolution.issues.all()) {
    seen += "  " + format_issue(issue) + "\n";
    if (issue.rule == c.rule && issue.message == c.message) {
      EXPECT_EQ(issue.severity, c.severity);
      return;
    }
  }
  ADD_FAILURE() << "expected [" << c.rule << "]: " << c.message << "\nseen:\n" << seen;
}

const json kDropAndPad = {
    {"num_experts", 4}, {"moe_expert_capacity_factor", 1.0}, {"moe_pad_expert_input_to_capacity", true}};

json merged(json base, const json& more) {
  base.update(more);
  return base;
}

INSTANTIATE_TEST_SUITE_P(
    Rules, RuleFiresTest,
    ::testing::Values(
        FiringCase{"MC1",
                   {{"num_layers", 0}},
                   "MC-1",
                   Severity::kError,
                   "--num-layers must be >= 1, got 0; fix: pass a positive value"},
        FiringCase{"MC2",
                   {{"hidden_size", 100}, {"num_attention_heads", 3}},
                   "MC-2",
                   Severity::kError,
                   "--hidden-size 100 is not divisible by --num-attention-heads 3; fix: pick a head count that "
                   "divides the hidden size"},
        FiringCase{"MC3",
                   {{"num_attention_heads", 4}, {"group_query_attention", true}, {"num_query_groups", 3}},
                   "MC-3",
                   Severity::kError,
                   "--num-attention-heads 4 is not divisible by --num-query-groups 3; fix: pick a group count that "
                   "divides the head count"},
        FiringCase{"MC4",
                   {{"hidden_size", 30}, {"position_embedding_type", "rope"}},
                   "MC-4",
                   Severity::kError,
                   "--position-embedding-type rope needs an even head size, got 15 (--hidden-size 30 / "
                   "--num-attention-heads 2); fix: choose sizes with an even hidden / heads, or use learned_absolute"},
        FiringCase{"MC5",
                   {{"num_experts", 4}, {"moe_router_topk", 5}},
                   "MC-5",
                   Severity::kError,
                   "--moe-router-topk 5 must be between 1 and --num-experts 4; fix: pass a top-k in that range"},
        FiringCase{"MC6",
                   {{"num_experts", 4}, {"moe_pad_expert_input_to_capacity", true}},
                   "MC-6",
                   Severity::kError,
                   "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor; fix: set "
                   "--moe-expert-capacity-factor (e.g. 1.0) or drop --moe-pad-expert-input-to-capacity"},
        FiringCase{"MC7",
                   {{"num_experts", 4}, {"moe_expert_capacity_factor", -1}},
                   "MC-7",
                   Severity::kError,
                   "--moe-expert-capacity-factor must be > 0, got -1; fix: pass e.g. 1.0, or leave it unset for "
                   "dropless MoE"},
        FiringCase{"FL1Lr",
                   {{"lr", std::nan("")}},
                   "FL-1",
                   Severity::kError,
                   "--lr must be a finite number, got nan; fix: pass a finite value (default 0.0003)"},
        FiringCase{"FL1ClipGrad",
                   {{"clip_grad", std::nan("")}},
                   "FL-1",
                   Severity::kError,
                   "--clip-grad must be a finite number, got nan; fix: pass a finite value (default 1)"},
        FiringCase{"FL1NormEpsilon",
                   {{"norm_epsilon", HUGE_VAL}},
                   "FL-1",
                   Severity::kError,
                   "--norm-epsilon must be a finite number, got inf; fix: pass a finite value (default 1e-05)"},
        FiringCase{"FL1HiddenDropout",
                   {{"hidden_dropout", std::nan("")}},
                   "FL-1",
                   Severity::kError,
                   "--hidden-dropout must be a finite number, got nan; fix: pass a finite value (default 0.1)"},
        FiringCase{"FL1CapacityFactor",
                   {{"num_experts", 4}, {"moe_expert_capacity_factor", -HUGE_VAL}},
                   "FL-1",
                   Severity::kError,
                   "--moe-expert-capacity-factor must be a finite number, got -inf; fix: pass a finite value"},
        FiringCase{"MC15",
                   {{"position_embedding_type", "rope"}, {"rotary_base", 0.0}},
                   "MC-15",
                   Severity::kError,
                   "--rotary-base must be > 0, got 0; fix: pass e.g. 10000"},
        FiringCase{"MC1KvChannels",
                   {{"kv_channels", 0}},
                   "MC-1",
                   Severity::kError,
                   "--kv-channels must be >= 1, got 0; fix: pass a positive value"},
        FiringCase{"MC4KvChannels",
                   {{"position_embedding_type", "rope"}, {"kv_channels", 15}},
                   "MC-4",
                   Severity::kError,
                   "--position-embedding-type rope needs an even head size, got --kv-channels 15; fix: pass an even "
                   "--kv-channels, or use learned_absolute"},
        FiringCase{"MC17",
                   {{"position_embedding_type", "rope"}, {"use_rope_scaling", true}, {"rope_scaling_factor", 0.0}},
                   "MC-17",
                   Severity::kError,
                   "--rope-scaling-factor must be > 0, got 0; fix: pass the factor the model was trained with (Llama "
                   "3.1: 8, Llama 3.2: 32)"},
        FiringCase{"MC18",
                   {{"use_rope_scaling", true}},
                   "MC-18",
                   Severity::kWarning,
                   "--use-rope-scaling has no effect without --position-embedding-type rope; ignored"},
        FiringCase{"MC20",
                   {{"position_embedding_type", "rope"}, {"seq_length", 128}, {"max_position_embeddings", 64}},
                   "MC-20",
                   Severity::kNote,
                   "--seq-length 128 is past --max-position-embeddings 64 with RoPE: the model's context becomes 128, "
                   "the positions it trains on (what generate and serve take)"},
        FiringCase{"MC19",
                   {{"swiglu", true}, {"openai_gelu", true}},
                   "MC-19",
                   Severity::kWarning,
                   "--openai-gelu has no effect with --swiglu (SwiGLU gates with SiLU, not GELU); ignored"},
        FiringCase{"MC21",
                   {{"num_experts", 4}, {"moe_shared_expert_gate", true}},
                   "MC-21",
                   Severity::kError,
                   "--moe-shared-expert-gate gates a shared expert, and there is none; fix: add "
                   "--moe-shared-expert-intermediate-size (e.g. the --moe-ffn-hidden-size) or drop "
                   "--moe-shared-expert-gate"},
        FiringCase{"MC22",
                   {{"qk_layernorm_across_heads", true}},
                   "MC-22",
                   Severity::kWarning,
                   "--qk-layernorm-across-heads has no effect without --qk-layernorm; ignored"},
        FiringCase{"MC16",
                   {{"moe_aux_loss_coeff", -0.5}},
                   "MC-16",
                   Severity::kError,
                   "--moe-aux-loss-coeff must be >= 0, got -0.5; fix: pass 0 to turn the auxiliary loss off, or e.g. "
                   "0.01"},
        FiringCase{"TR9EmptyPrompt",
                   {{"sample_prompt", ""}},
                   "TR-9",
                   Severity::kError,
                   "--sample-prompt is empty, but a sample continues a prompt; fix: pass at least one character (e.g. "
                   "--sample-prompt \"The \"), or --sample-tokens 0 for no samples"},
        FiringCase{
            "TR9Negative",
            {{"sample_tokens", -1}},
            "TR-9",
            Severity::kError,
            "--sample-tokens -1, --sample-top-k 40 and --sample-temperature 0.8 must be >= 0; fix: pass 0 for no "
            "sample, all tokens or greedy decoding"},
        FiringCase{"TR7NotANumber",
                   {{"split", "nan,1,1"}},
                   "TR-7",
                   Severity::kError,
                   "--split 'nan,1,1' must be up to three comma-separated non-negative weights with a positive first "
                   "(train) weight; fix: e.g. --split 969,30,1"},
        FiringCase{"MC8",
                   {{"num_experts", 4}, {"moe_layer_freq", "1,0,1"}},
                   "MC-8",
                   Severity::kError,
                   "--moe-layer-freq '1,0,1' is neither a positive integer nor a list of 2 zeros and ones (one per "
                   "layer); fix: e.g. --moe-layer-freq 2 or --moe-layer-freq 1,0,1,0"},
        FiringCase{"MC9",
                   {{"attention_dropout", 1.0}},
                   "MC-9",
                   Severity::kError,
                   "--attention-dropout must be in [0, 1), got 1; fix: pass e.g. 0 or 0.1"},
        FiringCase{"MC10",
                   {{"seq_length", 128}, {"max_position_embeddings", 64}},
                   "MC-10",
                   Severity::kError,
                   "--seq-length 128 exceeds --max-position-embeddings 64; fix: raise --max-position-embeddings or "
                   "shorten --seq-length"},
        FiringCase{"MC11",
                   {{"num_query_groups", 1}},
                   "MC-11",
                   Severity::kWarning,
                   "--num-query-groups 1 has no effect without --group-query-attention; ignored (add "
                   "--group-query-attention to use grouped-query attention)"},
        FiringCase{"MC12",
                   {{"moe_expert_capacity_factor", 1.0}},
                   "MC-12",
                   Severity::kWarning,
                   "--moe-expert-capacity-factor has no effect without --num-experts (dense model); ignored"},
        FiringCase{"MC13",
                   {{"recompute_granularity", "full"}},
                   "MC-13",
                   Severity::kError,
                   "--recompute-granularity full needs --recompute-method; fix: add --recompute-method uniform or "
                   "--recompute-method block"},
        FiringCase{"MC14",
                   {{"num_experts", 1}},
                   "MC-14",
                   Severity::kError,
                   "--num-experts 1 makes no MoE layer (an MoE layer needs 2 or more experts); fix: drop "
                   "--num-experts for a dense model or pass 2 or more"},
        FiringCase{"TR1",
                   {{"micro_batch_size", 0}},
                   "TR-1",
                   Severity::kError,
                   "--micro-batch-size must be >= 1, got 0; fix: pass a positive value"},
        FiringCase{"TR2",
                   {{"micro_batch_size", 4}, {"global_batch_size", 10}},
                   "TR-2",
                   Severity::kError,
                   "--global-batch-size 10 is not a multiple of --micro-batch-size 4 x data-parallel size 1; fix: "
                   "pass a multiple of 4"},
        FiringCase{"TR3",
                   {{"lr", 0.001}, {"min_lr", 0.01}},
                   "TR-3",
                   Severity::kError,
                   "--lr and --min-lr must satisfy 0 <= --min-lr <= --lr, got --lr 0.001 and --min-lr 0.01; fix: "
                   "lower --min-lr or raise --lr"},
        FiringCase{"TR4",
                   {{"lr_warmup_iters", 500}, {"train_iters", 200}},
                   "TR-4",
                   Severity::kError,
                   "--lr-warmup-iters 500 must be between 0 and --lr-decay-iters 200 (unset = --train-iters); fix: "
                   "shorten the warmup or lengthen the decay"},
        FiringCase{"TR5",
                   {{"mock_data", true}, {"data_path", "x.bin"}},
                   "TR-5",
                   Severity::kError,
                   "--mock-data and --data-path x.bin cannot both be set; fix: keep --data-path for real data or "
                   "--mock-data for synthetic tokens"},
        FiringCase{"TR6",
                   {{"save_interval", 10}},
                   "TR-6",
                   Severity::kError,
                   "--save-interval needs --save; fix: pass --save DIR or drop --save-interval"},
        FiringCase{"TR7",
                   {{"split", "90,x"}},
                   "TR-7",
                   Severity::kError,
                   "--split '90,x' must be up to three comma-separated non-negative weights with a positive first "
                   "(train) weight; fix: e.g. --split 969,30,1"},
        FiringCase{"TR8",
                   {{"adam_beta2", 1.0}},
                   "TR-8",
                   Severity::kError,
                   "AdamW settings out of range: --adam-beta1 0.9 and --adam-beta2 1 must be in [0, 1), --adam-eps "
                   "1e-08 > 0, --weight-decay 0.01 and --clip-grad 1 >= 0; fix: e.g. the defaults 0.9, 0.999, "
                   "1e-08, 0.01, 1"},
        FiringCase{"G1",
                   {{"cuda_graph_warmup_steps", 0}},
                   "G1",
                   Severity::kError,
                   "cuda_graph_warmup_steps must be >= 1, got 0; fix: pass --cuda-graph-warmup-steps 1 or more "
                   "(default 3)"},
        FiringCase{"VA8",
                   {{"cuda_graph_impl", "local"}, {"inference_dynamic_batching_num_cuda_graphs", 0}},
                   "VA-8",
                   Severity::kError,
                   "--inference-dynamic-batching-num-cuda-graphs must be > 0 or -1 (auto) with --cuda-graph-impl "
                   "local, got 0; fix: pass a positive count or -1"},
        FiringCase{"VA6",
                   {{"cuda_graph_impl", "full_iteration"}},
                   "VA-6",
                   Severity::kNote,
                   "--check-for-nan-in-loss-and-grad stays on with --cuda-graph-impl full_iteration: graphed's NaN "
                   "check runs on the device inside the graph and is read at log intervals (Megatron requires "
                   "--no-check-for-nan-in-loss-and-grad here)"},
        FiringCase{"VA9",
                   {{"cuda_graph_impl", "transformer_engine"}, {"te_rng_tracker", true}},
                   "VA-9",
                   Severity::kNote,
                   "--te-rng-tracker changes nothing in graphed: every CUDA graph registers the random generator it "
                   "draws from, so dropout is graph-safe with any --cuda-graph-impl; the flag can be dropped"},
        FiringCase{"TC8",
                   {{"cuda_graph_impl", "local"}, {"num_experts", 4}, {"cuda_graph_modules", {"moe_router"}}},
                   "TC-8",
                   Severity::kNote,
                   "--cuda-graph-impl local graphs moe_router and moe_preprocess together; added moe_preprocess to "
                   "--cuda-graph-modules"},
        FiringCase{"G4",
                   {{"cuda_graph_impl", "transformer_engine"}, {"cuda_graph_modules", {"mamba"}}},
                   "G4",
                   Severity::kError,
                   "--cuda-graph-modules mamba needs Mamba layers, but this model has none (it is not a hybrid "
                   "model); fix: drop mamba from --cuda-graph-modules, or put M layers in --hybrid-override-pattern"},
        FiringCase{"G4NoMambaInPattern",
                   {{"cuda_graph_impl", "local"},
                    {"num_layers", 2},
                    {"hybrid_override_pattern", "*-"},
                    {"cuda_graph_modules", {"attn", "mamba"}}},
                   "G4",
                   Severity::kError,
                   "--cuda-graph-modules mamba needs Mamba layers, but this model has none (its hybrid pattern '*-' "
                   "has no M); fix: drop mamba from --cuda-graph-modules, or put M layers in "
                   "--hybrid-override-pattern"},
        FiringCase{"HY1",
                   {{"num_layers", 2}, {"hybrid_override_pattern", "M*"}},
                   "HY-1",
                   Severity::kNote,
                   "--hybrid-override-pattern or a hybrid ratio makes this a Mamba-hybrid model; --is-hybrid-model "
                   "is turned on"},
        FiringCase{"HY2",
                   {{"num_layers", 3}, {"is_hybrid_model", true}, {"hybrid_override_pattern", "M*"}},
                   "HY-2",
                   Severity::kError,
                   "--hybrid-override-pattern 'M*' has 2 layers, but --num-layers is 3; fix: one symbol per layer"},
        FiringCase{"HY3",
                   {{"num_layers", 2}, {"is_hybrid_model", true}, {"hybrid_override_pattern", "ME"}},
                   "HY-3",
                   Severity::kError,
                   "--hybrid-override-pattern 'ME' has 1 MoE layer(s) (E), but --num-experts is unset; fix: set "
                   "--num-experts 2 or more, or replace E with - (a dense MLP layer)"},
        FiringCase{
            "HY3Unused",
            {{"num_layers", 2}, {"is_hybrid_model", true}, {"hybrid_override_pattern", "M-"}, {"num_experts", 4}},
            "HY-3",
            Severity::kWarning,
            "--num-experts 4 has no effect: the hybrid pattern 'M-' has no MoE layer (E); ignored (put E in "
            "--hybrid-override-pattern to use experts)"},
        FiringCase{"HY4HeadDim",
                   {{"num_layers", 1}, {"is_hybrid_model", true}, {"mamba_head_dim", 48}},
                   "HY-4",
                   Severity::kError,
                   "the Mamba inner size 2 x --hidden-size = 256 is not a multiple of --mamba-head-dim 48; fix: pass a "
                   "head dim that divides it, or set --mamba-num-heads"},
        FiringCase{"HY4Groups",
                   {{"num_layers", 1}, {"is_hybrid_model", true}, {"mamba_head_dim", 32}, {"mamba_num_groups", 3}},
                   "HY-4",
                   Severity::kError,
                   "the 8 Mamba heads do not split into --mamba-num-groups 3; fix: pass a group count that divides 8"},
        FiringCase{"HY4Positive",
                   {{"num_layers", 1}, {"is_hybrid_model", true}, {"mamba_conv_width", 0}},
                   "HY-4",
                   Severity::kError,
                   "--mamba-conv-width must be >= 1, got 0; fix: pass a positive value"},
        FiringCase{"HY6",
                   {{"mamba_state_dim", 64}},
                   "HY-6",
                   Severity::kWarning,
                   "--mamba-state-dim has no effect: the model has no Mamba layers (M in --hybrid-override-pattern); "
                   "ignored"},
        FiringCase{"HY6PatternWithoutMamba",
                   {{"num_layers", 2}, {"hybrid_override_pattern", "*-"}, {"mamba_chunk_size", 64}},
                   "HY-6",
                   Severity::kWarning,
                   "--mamba-chunk-size has no effect: the model has no Mamba layers (M in --hybrid-override-pattern); "
                   "ignored"},
        FiringCase{"HY5",
                   {{"num_layers", 2}, {"hybrid_override_pattern", "ME"}, {"num_experts", 4}, {"moe_layer_freq", 2}},
                   "HY-5",
                   Severity::kWarning,
                   "--moe-layer-freq 2 has no effect on a hybrid model, whose MoE layers are the E layers of "
                   "--hybrid-override-pattern; ignored"},
        FiringCase{"G5",
                   {{"optimizer_cuda_graph", true}},
                   "G5",
                   Severity::kError,
                   "--optimizer-cuda-graph needs a CUDA-graph implementation, got --cuda-graph-impl none (eager "
                   "training graphs nothing); fix: add --cuda-graph-impl full_iteration, local or transformer_engine, "
                   "or drop --optimizer-cuda-graph"},
        FiringCase{"TC9",
                   merged(kDropAndPad,
                          {{"cuda_graph_impl", "transformer_engine"}, {"cuda_graph_modules", {"moe", "moe_router"}}}),
                   "TC-9", Severity::kError,
                   "--cuda-graph-modules must not contain both moe and moe_router, got moe moe_router; fix: use moe "
                   "to graph the whole MoE MLP (drop-and-pad or --moe-grouped-gemm) or moe_router [moe_preprocess] to "
                   "graph the router"},
        FiringCase{
            "TC10",
            {{"cuda_graph_impl", "transformer_engine"},
             {"num_experts", 4},
             {"cuda_graph_modules", {"attn", "moe_preprocess"}}},
            "TC-10",
            Severity::kError,
            "--cuda-graph-modules moe_preprocess needs moe_router, got attn moe_preprocess; fix: add moe_router"},
        FiringCase{"TC11",
                   {{"cuda_graph_impl", "transformer_engine"}, {"cuda_graph_modules", {"moe_router"}}},
                   "TC-11",
                   Severity::kError,
                   "--cuda-graph-modules moe_router needs an MoE model, but --num-experts is unset; fix: drop it from "
                   "--cuda-graph-modules or set --num-experts"},
        FiringCase{"TC12",
                   merged(kDropAndPad, {{"cuda_graph_impl", "transformer_engine"}, {"cuda_graph_modules", {"mlp"}}}),
                   "TC-12", Severity::kError,
                   "--cuda-graph-modules mlp needs dense layers, but every layer is MoE (--moe-layer-freq 1); fix: "
                   "graph moe (drop-and-pad or --moe-grouped-gemm) or moe_router instead of mlp"},
        FiringCase{"TC13",
                   {{"cuda_graph_impl", "transformer_engine"}, {"num_experts", 4}, {"cuda_graph_modules", {"moe"}}},
                   "TC-13",
                   Severity::kError,
                   "--cuda-graph-modules moe needs static MoE shapes, but --moe-expert-capacity-factor is unset and "
                   "--moe-grouped-gemm is off; fix: pass --moe-grouped-gemm (dropless), or set "
                   "--moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity, or graph moe_router "
                   "moe_preprocess instead"},
        FiringCase{"TC14",
                   {{"cuda_graph_impl", "transformer_engine"},
                    {"num_experts", 4},
                    {"moe_expert_capacity_factor", 1.0},
                    {"moe_token_dispatcher_type", "alltoall"},
                    {"cuda_graph_modules", {"moe_router", "moe_preprocess"}}},
                   "TC-14",
                   Severity::kError,
                   "--cuda-graph-modules moe_preprocess cannot be graphed with --moe-token-dispatcher-type alltoall "
                   "and --moe-expert-capacity-factor 1 without padding: the preprocess step copies to the host and "
                   "synchronizes; fix: drop moe_preprocess, add --moe-pad-expert-input-to-capacity, or use allgather"},
        FiringCase{"G2",
                   {{"cuda_graph_impl", "local"}, {"num_experts", 4}},
                   "G2",
                   Severity::kError,
                   "whole-layer capture (--cuda-graph-impl local without --cuda-graph-modules) needs static shapes, "
                   "but MoE layers are dropless (--moe-expert-capacity-factor is unset and --moe-grouped-gemm is "
                   "off); fix: pass --moe-grouped-gemm, or --cuda-graph-modules attn moe_router moe_preprocess, or "
                   "make MoE drop-and-pad with --moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity"},
        FiringCase{"G3",
                   {{"cuda_graph_impl", "full_iteration"}, {"num_experts", 4}, {"moe_expert_capacity_factor", 1.0}},
                   "G3",
                   Severity::kError,
                   "--cuda-graph-impl full_iteration needs static shapes, but MoE layers are dropless "
                   "(--moe-pad-expert-input-to-capacity is off and --moe-grouped-gemm is off); fix: pass "
                   "--moe-grouped-gemm (dropless, static "
                   "shapes), or make MoE drop-and-pad with --moe-expert-capacity-factor and "
                   "--moe-pad-expert-input-to-capacity, or use --cuda-graph-impl transformer_engine "
                   "--cuda-graph-modules attn moe_router moe_preprocess"},
        FiringCase{
            "TC15",
            {{"cuda_graph_impl", "transformer_engine"},
             {"recompute_granularity", "full"},
             {"recompute_method", "uniform"}},
            "TC-15",
            Severity::kError,
            "--recompute-granularity full needs --cuda-graph-impl full_iteration, got --cuda-graph-impl "
            "transformer_engine; fix: use --recompute-granularity selective or --cuda-graph-impl full_iteration"},
        FiringCase{"TC16",
                   {{"cuda_graph_impl", "transformer_engine"},
                    {"num_experts", 4},
                    {"recompute_granularity", "selective"},
                    {"recompute_modules", {"moe"}},
                    {"cuda_graph_modules", {"moe_router"}}},
                   "TC-16",
                   Severity::kError,
                   "--recompute-modules moe cannot be combined with --cuda-graph-modules moe_router under "
                   "--cuda-graph-impl transformer_engine; fix: drop moe from --recompute-modules or moe_router from "
                   "--cuda-graph-modules"},
        FiringCase{"TC17",
                   {{"cuda_graph_impl", "transformer_engine"},
                    {"recompute_granularity", "selective"},
                    {"cuda_graph_modules", {"attn"}}},
                   "TC-17",
                   Severity::kError,
                   "--attention-dropout 0.1 cannot be used while core_attn is recomputed inside a graph "
                   "(--recompute-modules core_attn with graphed attention); fix: set --attention-dropout 0 or drop "
                   "core_attn from --recompute-modules"},
        FiringCase{"TC18",
                   {{"cuda_graph_impl", "transformer_engine"},
                    {"recompute_granularity", "selective"},
                    {"recompute_modules", {"mlp"}}},
                   "TC-18",
                   Severity::kError,
                   "--hidden-dropout 0.1 cannot be used while mlp is recomputed inside a graph; fix: set "
                   "--hidden-dropout 0 or drop it from --recompute-modules"}),
    [](const ::testing::TestParamInfo<FiringCase>& info) { return info.param.name; });

struct QuietCase {
  std::string name;
  json settings;
  std::string rule;
};

void PrintTo(const QuietCase& c, std::ostream* out) { *out << c.name; }

class RuleStaysQuietTest : public ::testing::TestWithParam<QuietCase> {};

TEST_P(RuleStaysQuietTest, OnANearMiss) {
  const QuietCase& c = GetParam();
  const Resolution resolution = resolve_json(c.settings);
  for (const auto& issue : resolution.issues.all()) {
    EXPECT_NE(issue.rule, c.rule) << format_issue(issue);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rules, RuleStaysQuietTest,
    ::testing::Values(
        QuietCase{"MC2DivisibleHeads", {{"hidden_size", 128}, {"num_attention_heads", 4}}, "MC-2"},
        QuietCase{"MC3GroupsDivideHeads",
                  {{"num_attention_heads", 4}, {"group_query_attention", true}, {"num_query_groups", 2}},
                  "MC-3"},
        QuietCase{"MC4EvenRopeHead", {{"position_embedding_type", "rope"}}, "MC-4"},
        QuietCase{"MC2HeadSizeGiven", {{"hidden_size", 100}, {"num_attention_heads", 3}, {"kv_channels", 32}}, "MC-2"},
        QuietCase{"MC4EvenKvChannelsOddHidden",
                  {{"position_embedding_type", "rope"}, {"hidden_size", 30}, {"kv_channels", 16}},
                  "MC-4"},
        QuietCase{"MC17ScalingOff", {{"position_embedding_type", "rope"}, {"rope_scaling_factor", 0.0}}, "MC-17"},
        QuietCase{"MC18WithRope", {{"position_embedding_type", "rope"}, {"use_rope_scaling", true}}, "MC-18"},
        QuietCase{"MC19GeluMlp", {{"openai_gelu", true}}, "MC-19"},
        QuietCase{"MC21WithASharedExpert",
                  {{"num_experts", 4}, {"moe_shared_expert_gate", true}, {"moe_shared_expert_intermediate_size", 32}},
                  "MC-21"},
        QuietCase{"MC20RopeWithinPositions",
                  {{"position_embedding_type", "rope"}, {"seq_length", 64}, {"max_position_embeddings", 128}},
                  "MC-20"},
        QuietCase{
            "MC8EveryOtherLayer", {{"num_experts", 4}, {"num_layers", 4}, {"moe_layer_freq", "[1,0,1,0]"}}, "MC-8"},
        QuietCase{"MC10RopeIgnoresPositions",
                  {{"position_embedding_type", "rope"}, {"seq_length", 128}, {"max_position_embeddings", 64}},
                  "MC-10"},
        QuietCase{"MC11WithGqa", {{"group_query_attention", true}, {"num_query_groups", 1}}, "MC-11"},
        QuietCase{"TR2Multiple", {{"micro_batch_size", 4}, {"global_batch_size", 16}}, "TR-2"},
        QuietCase{"TR6WithSave", {{"save_interval", 10}, {"save", "/tmp/ckpt"}}, "TR-6"},
        QuietCase{"G1OneWarmup", {{"cuda_graph_warmup_steps", 1}}, "G1"},
        QuietCase{
            "VA8Auto", {{"cuda_graph_impl", "local"}, {"inference_dynamic_batching_num_cuda_graphs", -1}}, "VA-8"},
        QuietCase{"VA6NanCheckOff",
                  {{"cuda_graph_impl", "full_iteration"}, {"check_for_nan_in_loss_and_grad", false}},
                  "VA-6"},
        QuietCase{"VA9FlagNotGiven", {{"cuda_graph_impl", "local"}}, "VA-9"},
        QuietCase{"VA9NoGraphs", json::object(), "VA-9"},
        QuietCase{"TC8BothGiven",
                  {{"cuda_graph_impl", "local"},
                   {"num_experts", 4},
                   {"cuda_graph_modules", {"moe_router", "moe_preprocess"}}},
                  "TC-8"},
        QuietCase{"TC10LocalAddsTheRouter",
                  {{"cuda_graph_impl", "local"}, {"num_experts", 4}, {"cuda_graph_modules", {"moe_preprocess"}}},
                  "TC-10"},
        QuietCase{"TC11MoeModel",
                  {{"cuda_graph_impl", "transformer_engine"},
                   {"num_experts", 4},
                   {"cuda_graph_modules", {"attn", "moe_router"}}},
                  "TC-11"},
        QuietCase{"TC12SomeDenseLayers",
                  merged(kDropAndPad, {{"cuda_graph_impl", "transformer_engine"},
                                       {"moe_layer_freq", "2"},
                                       {"cuda_graph_modules", {"mlp"}}}),
                  "TC-12"},
        QuietCase{
            "TC13DropAndPad",
            merged(kDropAndPad, {{"cuda_graph_impl", "transformer_engine"}, {"cuda_graph_modules", {"attn", "moe"}}}),
            "TC-13"},
        QuietCase{"TC14Padded",
                  merged(kDropAndPad, {{"cuda_graph_impl", "transformer_engine"},
                                       {"moe_token_dispatcher_type", "alltoall"},
                                       {"cuda_graph_modules", {"moe_router", "moe_preprocess"}}}),
                  "TC-14"},
        QuietCase{"TC14Allgather",
                  {{"cuda_graph_impl", "transformer_engine"},
                   {"num_experts", 4},
                   {"moe_expert_capacity_factor", 1.0},
                   {"cuda_graph_modules", {"moe_router", "moe_preprocess"}}},
                  "TC-14"},
        QuietCase{"G2DropAndPad", merged(kDropAndPad, {{"cuda_graph_impl", "local"}}), "G2"},
        QuietCase{"G2Partial",
                  {{"cuda_graph_impl", "transformer_engine"},
                   {"num_experts", 4},
                   {"cuda_graph_modules", {"attn", "moe_router", "moe_preprocess"}}},
                  "G2"},
        QuietCase{"G3DropAndPad", merged(kDropAndPad, {{"cuda_graph_impl", "full_iteration"}}), "G3"},
        QuietCase{"G3GroupedGemm",
                  {{"num_experts", 4}, {"moe_grouped_gemm", true}, {"cuda_graph_impl", "full_iteration"}},
                  "G3"},
        QuietCase{"G3GroupedGemmUnpadded",
                  {{"num_experts", 4},
                   {"moe_expert_capacity_factor", 1.0},
                   {"moe_grouped_gemm", true},
                   {"cuda_graph_impl", "full_iteration"}},
                  "G3"},
        QuietCase{
            "G2GroupedGemm", {{"num_experts", 4}, {"moe_grouped_gemm", true}, {"cuda_graph_impl", "local"}}, "G2"},
        QuietCase{"TC13GroupedGemm",
                  {{"num_experts", 4},
                   {"moe_grouped_gemm", true},
                   {"cuda_graph_impl", "transformer_engine"},
                   {"cuda_graph_modules", {"attn", "moe"}}},
                  "TC-13"},
        QuietCase{"G5FullIteration", {{"cuda_graph_impl", "full_iteration"}, {"optimizer_cuda_graph", true}}, "G5"},
        QuietCase{"G5Local", {{"cuda_graph_impl", "local"}, {"optimizer_cuda_graph", true}}, "G5"},
        QuietCase{"TC15NoGraphs", {{"recompute_granularity", "full"}, {"recompute_method", "block"}}, "TC-15"},
        QuietCase{
            "TC15FullIteration",
            {{"cuda_graph_impl", "full_iteration"}, {"recompute_granularity", "full"}, {"recompute_method", "block"}},
            "TC-15"},
        QuietCase{"TC16Local",
                  {{"cuda_graph_impl", "local"},
                   {"num_experts", 4},
                   {"recompute_granularity", "selective"},
                   {"recompute_modules", {"moe"}},
                   {"cuda_graph_modules", {"moe_router"}}},
                  "TC-16"},
        QuietCase{"TC17NoDropout",
                  {{"cuda_graph_impl", "transformer_engine"},
                   {"recompute_granularity", "selective"},
                   {"attention_dropout", 0.0},
                   {"cuda_graph_modules", {"attn"}}},
                  "TC-17"},
        QuietCase{"TC17AttentionEager",
                  {{"cuda_graph_impl", "transformer_engine"},
                   {"recompute_granularity", "selective"},
                   {"cuda_graph_modules", {"mlp"}}},
                  "TC-17"},
        QuietCase{"TC18MlpEager",
                  {{"cuda_graph_impl", "transformer_engine"},
                   {"recompute_granularity", "selective"},
                   {"recompute_modules", {"mlp"}},
                   {"cuda_graph_modules", {"attn"}},
                   {"attention_dropout", 0.0}},
                  "TC-18"}),
    [](const ::testing::TestParamInfo<QuietCase>& info) { return info.param.name; });

// ---- parallel layout: PL-* depend on the launch's process count (WORLD_SIZE), not a setting ----------

Resolution resolve_launched(const json& overrides, int64_t world_size) {
  Settings settings;
  apply_settings(settings, overrides, "test");
  settings.train.world_size = world_size;
  return resolve_run_config(settings);
}

const json kTwoStagesOfFour = {{"pipeline_model_parallel_size", 2}, {"num_layers", 8}};

struct LaunchCase {
  std::string name;
  json settings;
  int64_t world_size;
  std::string rule;
  Severity severity;
  std::string message;
};

void PrintTo(const LaunchCase& c, std::ostream* out) { *out << c.name; }

class ParallelRuleFiresTest : public ::testing::TestWithParam<LaunchCase> {};

TEST_P(ParallelRuleFiresTest, WithItsValuesAndFix) {
  const LaunchCase& c = GetParam();
  const auto& rules = all_rules();
  EXPECT_TRUE(std::any_of(rules.begin(), rules.end(), [&](const RuleInfo& r) { return r.id == c.rule; }))
      << c.rule << " is missing from all_rules()";
  if (c.severity == Severity::kError) {
    EXPECT_NE(c.message.find("; fix: "), std::string::npos) << "an error names its fix: " << c.message;
  }
  const Resolution resolution = resolve_launched(c.settings, c.world_size);
  std::string seen;
  int matches = 0;
  for (const auto& issue : resolution.issues.all()) {
    seen += "  " + format_issue(issue) + "\n";
    if (issue.rule == c.rule && issue.message == c.message) {
      EXPECT_EQ(issue.severity, c.severity);
      ++matches;
    }
  }
  EXPECT_EQ(matches, 1) << "expected [" << c.rule << "] once: " << c.message << "\nseen:\n" << seen;
}

INSTANTIATE_TEST_SUITE_P(
    Rules, ParallelRuleFiresTest,
    ::testing::Values(
        LaunchCase{"PL7HeadsDoNotSplit",
                   {{"tensor_model_parallel_size", 2}, {"num_attention_heads", 3}, {"hidden_size", 48}},
                   2,
                   "PL-7",
                   Severity::kError,
                   "--num-attention-heads 3 does not split over --tensor-model-parallel-size 2 (each rank takes an "
                   "equal part); fix: pass a tensor size that divides 3, or more heads"},
        LaunchCase{"PL12QkNormAcrossHeads",
                   {{"tensor_model_parallel_size", 2}, {"qk_layernorm", true}, {"qk_layernorm_across_heads", true}},
                   2,
                   "PL-12",
                   Severity::kError,
                   "--qk-layernorm-across-heads normalizes over every head at once, which --tensor-model-parallel-size "
                   "2 would split over the ranks; fix: --tensor-model-parallel-size 1, or drop "
                   "--qk-layernorm-across-heads"},
        LaunchCase{"PL13ExpertParallelismWithoutExperts",
                   {{"expert_model_parallel_size", 2}},
                   2,
                   "PL-13",
                   Severity::kError,
                   "--expert-model-parallel-size 2 needs MoE layers; fix: pass --num-experts, or drop "
                   "--expert-model-parallel-size"},
        LaunchCase{"PL14ExpertsDoNotSplit",
                   {{"num_experts", 6}, {"expert_model_parallel_size", 4}, {"moe_token_dispatcher_type", "alltoall"}},
                   4,
                   "PL-14",
                   Severity::kError,
                   "--num-experts 6 does not split over --expert-model-parallel-size 4 (each rank holds an equal share "
                   "of the experts); fix: pass an expert-parallel size that divides 6, or a multiple of 4 experts"},
        LaunchCase{"PL15ExpertSizeDoesNotDivideTheDataSize",
                   {{"num_experts", 8}, {"expert_model_parallel_size", 4}, {"moe_token_dispatcher_type", "alltoall"}},
                   2,
                   "PL-15",
                   Severity::kError,
                   "--expert-model-parallel-size 4 does not divide the data-parallel size 2 (WORLD_SIZE 2 / (tensor 1 "
                   "x pipeline 1)): expert-parallel ranks are data-parallel ranks of the dense layers; fix: launch a "
                   "multiple of 4 processes, or pass an expert-parallel size that divides 2"},
        LaunchCase{"PL16ExpertWithTensorParallelismWithoutSequenceParallelism",
                   {{"num_experts", 4},
                    {"expert_model_parallel_size", 2},
                    {"tensor_model_parallel_size", 2},
                    {"moe_token_dispatcher_type", "alltoall"}},
                   4,
                   "PL-16",
                   Severity::kNote,
                   "--expert-model-parallel-size 2 with --tensor-model-parallel-size 2 and without "
                   "--sequence-parallel: Megatron refuses this for MoE training; graphed runs it (each tensor rank of "
                   "a data rank routes and sends the same tokens, and the experts' partial outputs are summed over the "
                   "tensor ranks); pass --sequence-parallel to split the activations outside the experts as Megatron "
                   "does"},
        LaunchCase{"PL17ExpertTensorSizeIsTheTensorSizeOrOne",
                   {{"num_experts", 4},
                    {"expert_model_parallel_size", 2},
                    {"tensor_model_parallel_size", 4},
                    {"sequence_parallel", true},
                    {"expert_tensor_parallel_size", 2},
                    {"moe_token_dispatcher_type", "alltoall"}},
                   8,
                   "PL-17",
                   Severity::kError,
                   "--expert-tensor-parallel-size 2 with --tensor-model-parallel-size 4 is not supported in this "
                   "version (each expert is split over every tensor rank, or over none); fix: pass "
                   "--expert-tensor-parallel-size 4 (the default) or 1"},
        LaunchCase{"PL17WholeExpertsNeedExpertParallelism",
                   {{"num_experts", 4},
                    {"tensor_model_parallel_size", 2},
                    {"sequence_parallel", true},
                    {"expert_tensor_parallel_size", 1}},
                   2,
                   "PL-17",
                   Severity::kError,
                   "--expert-tensor-parallel-size 1 without expert parallelism is not supported in this version (the "
                   "expert tensor size differs from the tensor size only with --expert-model-parallel-size > 1); fix: "
                   "drop --expert-tensor-parallel-size, or add --expert-model-parallel-size"},
        LaunchCase{"PL15WholeExpertsTakeRanksOfAStage",
                   {{"num_experts", 4},
                    {"expert_model_parallel_size", 4},
                    {"tensor_model_parallel_size", 2},
                    {"sequence_parallel", true},
                    {"expert_tensor_parallel_size", 1},
                    {"moe_token_dispatcher_type", "alltoall"}},
                   2,
                   "PL-15",
                   Severity::kError,
                   "--expert-model-parallel-size 4 does not divide the 2 ranks of a pipeline stage (tensor 2 x data "
                   "1): with --expert-tensor-parallel-size 1 an expert group takes that many ranks of a stage; fix: "
                   "launch a multiple of 4 processes, or pass an expert-parallel size that divides 2"},
        LaunchCase{"PL20WholeExpertsUnderTensorParallelismNeedSequenceParallelism",
                   {{"num_experts", 4},
                    {"expert_model_parallel_size", 2},
                    {"tensor_model_parallel_size", 2},
                    {"expert_tensor_parallel_size", 1},
                    {"moe_token_dispatcher_type", "alltoall"}},
                   2,
                   "PL-20",
                   Severity::kError,
                   "--expert-tensor-parallel-size 1 with --tensor-model-parallel-size 2 needs --sequence-parallel "
                   "(with whole experts, each tensor rank sends its own part of the sequence to them; without it every "
                   "tensor rank holds the same tokens, which Megatron refuses too); fix: add --sequence-parallel, or "
                   "drop --expert-tensor-parallel-size"},
        LaunchCase{"PL18ExpertParallelismExchangesAllToAllWhicheverDispatcher",
                   {{"num_experts", 4}, {"expert_model_parallel_size", 2}},
                   2,
                   "PL-18",
                   Severity::kNote,
                   "--expert-model-parallel-size 2 with --moe-token-dispatcher-type allgather: graphed exchanges the "
                   "tokens all-to-all under expert parallelism whichever dispatcher is named. The sums are the same "
                   "as Megatron's allgather dispatcher's (which gathers every token to every expert rank and "
                   "reduce-scatters the outputs); all-to-all moves fewer rows. Pass --moe-token-dispatcher-type "
                   "alltoall to say so"},
        LaunchCase{"PL21DistributedOptimizerWithOneDataRankShardsNothing",
                   {{"use_distributed_optimizer", true}, {"tensor_model_parallel_size", 2}},
                   2,
                   "PL-21",
                   Severity::kNote,
                   "--use-distributed-optimizer with one data-parallel rank shards nothing: the one rank keeps the "
                   "whole optimizer state, as without it (launch more data-parallel ranks to share it out)"},
        LaunchCase{"PL22OverlapParamGatherNeedsTheDistributedOptimizer",
                   {{"overlap_param_gather", true}, {"overlap_grad_reduce", true}},
                   2,
                   "PL-22",
                   Severity::kError,
                   "--overlap-param-gather needs --use-distributed-optimizer and --overlap-grad-reduce (as in "
                   "Megatron: it overlaps the distributed optimizer's gathers); fix: add them, or drop "
                   "--overlap-param-gather"},
        LaunchCase{"PL23OverlapParamGatherUnderPerLayerGraphs",
                   {{"overlap_param_gather", true},
                    {"overlap_grad_reduce", true},
                    {"use_distributed_optimizer", true},
                    {"cuda_graph_impl", "local"}},
                   2,
                   "PL-23",
                   Severity::kError,
                   "--overlap-param-gather with --cuda-graph-impl local (a layer's graph cannot wait for a gather "
                   "launched outside it) is not supported in this version: graphed overlaps the gathers for dense "
                   "models under --cuda-graph-impl none or full_iteration without pipeline parallelism or FP8; fix: "
                   "drop --overlap-param-gather (the gathers then run right after the step)"},
        LaunchCase{"PL24OverlapParamGatherWithoutWorkingCopies",
                   {{"overlap_param_gather", true},
                    {"overlap_grad_reduce", true},
                    {"use_distributed_optimizer", true},
                    {"bf16", false}},
                   2,
                   "PL-24",
                   Severity::kNote,
                   "--overlap-param-gather has no effect without bf16 working copies (--no-bf16, --no-fused-kernels "
                   "or --device cpu): the weights are read as they are, so they are gathered right after the step"},
        LaunchCase{"PL25GradReduceInBf16NeedsBf16",
                   {{"grad_reduce_in_bf16", true}, {"bf16", false}},
                   2,
                   "PL-25",
                   Severity::kError,
                   "--grad-reduce-in-bf16 with --no-bf16: an fp32 run reduces its gradients in fp32 (Megatron ignores "
                   "the flag there); fix: drop --grad-reduce-in-bf16, or drop --no-bf16"},
        LaunchCase{"PL26GradReduceInBf16WithOneDataRank",
                   {{"grad_reduce_in_bf16", true}, {"bf16", true}, {"tensor_model_parallel_size", 2}},
                   2,
                   "PL-26",
                   Severity::kNote,
                   "--grad-reduce-in-bf16 with one data-parallel rank has no effect: no gradient is summed over "
                   "data-parallel ranks (launch more of them)"},
        LaunchCase{"G6GraphsOverDroplessExpertParallelism",
                   {{"num_experts", 4},
                    {"expert_model_parallel_size", 2},
                    {"moe_token_dispatcher_type", "alltoall"},
                    {"moe_grouped_gemm", true},
                    {"cuda_graph_impl", "full_iteration"}},
                   2,
                   "G6",
                   Severity::kError,
                   "--cuda-graph-impl full_iteration graphs the experts, which needs static shapes, but with "
                   "--expert-model-parallel-size 2 dropless MoE reads on the host how many tokens each rank receives; "
                   "fix: make MoE drop-and-pad (--moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity), "
                   "or graph attn moe_router moe_preprocess only (--cuda-graph-impl transformer_engine)"},
        LaunchCase{"MC23RankCapacityFactorZero",
                   {{"num_experts", 4}, {"moe_grouped_gemm", true}, {"moe_expert_rank_capacity_factor", 0.0}},
                   1,
                   "MC-23",
                   Severity::kError,
                   "--moe-expert-rank-capacity-factor must be > 0, got 0; fix: pass e.g. 2 (a multiple of the even "
                   "share of rows a rank may receive; at least the expert-parallel size never overflows), or drop it"},
        LaunchCase{"MC24RankCapacityFactorWithoutGroupedExperts",
                   {{"num_experts", 4}, {"moe_expert_rank_capacity_factor", 2.0}},
                   1,
                   "MC-24",
                   Severity::kError,
                   "--moe-expert-rank-capacity-factor needs dropless grouped experts (--moe-grouped-gemm without "
                   "drop-and-pad); fix: add --moe-grouped-gemm and drop --moe-pad-expert-input-to-capacity, or drop "
                   "--moe-expert-rank-capacity-factor"},
        LaunchCase{"MC26RankCapacityFactorWithDelayedFp8",
                   {{"num_experts", 4},
                    {"moe_grouped_gemm", true},
                    {"moe_expert_rank_capacity_factor", 2.0},
                    {"bf16", true},
                    {"fp8_format", "hybrid"},
                    {"fp8_recipe", "delayed"}},
                   1,
                   "MC-26",
                   Severity::kError,
                   "--moe-expert-rank-capacity-factor with --fp8-recipe delayed is not supported in this version (an "
                   "iteration that overflows a block runs again, and its layers would record their amaxes twice); "
                   "fix: --fp8-recipe tensorwise, or drop --moe-expert-rank-capacity-factor"},
        LaunchCase{"PL1ExpertParallelSizeZero",
                   {{"expert_model_parallel_size", 0}},
                   1,
                   "PL-1",
                   Severity::kError,
                   "--expert-model-parallel-size must be >= 1, got 0; fix: pass a positive value"},
        LaunchCase{"MC25RankCapacityFactorWithoutExpertParallelism",
                   {{"num_experts", 4}, {"moe_grouped_gemm", true}, {"moe_expert_rank_capacity_factor", 2.0}},
                   1,
                   "MC-25",
                   Severity::kWarning,
                   "--moe-expert-rank-capacity-factor has no effect with --expert-model-parallel-size 1 (without "
                   "expert parallelism every expert is on this rank, and the grouped GEMM already has static shapes); "
                   "ignored"},
        LaunchCase{"MC27PagedStashWithoutRankCapacityFactor",
                   {{"num_experts", 4},
                    {"expert_model_parallel_size", 2},
                    {"moe_token_dispatcher_type", "alltoall"},
                    {"moe_grouped_gemm", true},
                    {"moe_paged_stash", true}},
                   2,
                   "MC-27",
                   Severity::kError,
                   "--moe-paged-stash needs --moe-expert-rank-capacity-factor (it keeps the real rows of the fixed "
                   "expert blocks; without blocks there are only real rows, and nothing to save); fix: add "
                   "--moe-expert-rank-capacity-factor (e.g. 2) or drop --moe-paged-stash"},
        LaunchCase{"MC28PagedStashPageSizeZero",
                   {{"moe_paged_stash_page_size", 0}},
                   1,
                   "MC-28",
                   Severity::kError,
                   "--moe-paged-stash-page-size must be >= 1, got 0; fix: pass e.g. 64 (Megatron's default)"},
        LaunchCase{"MC28PagedStashSizeFactorZero",
                   {{"moe_paged_stash_buffer_size_factor_cuda", 0.0}},
                   1,
                   "MC-28",
                   Severity::kError,
                   "--moe-paged-stash-buffer-size-factor-cuda must not be 0 (the paged stash would hold nothing); "
                   "fix: pass e.g. 1.1 (times the most rows alive at once on a balanced load) or -1.1 (times the "
                   "most real rows alive at once in the first iteration)"},
        LaunchCase{"MC29PagedStashWithoutExpertParallelism",
                   {{"num_experts", 4},
                    {"moe_grouped_gemm", true},
                    {"moe_expert_rank_capacity_factor", 2.0},
                    {"moe_paged_stash", true}},
                   1,
                   "MC-29",
                   Severity::kWarning,
                   "--moe-paged-stash has no effect with --expert-model-parallel-size 1 (without expert parallelism "
                   "there are no fixed expert blocks); ignored"},
        LaunchCase{
            "G7GraphsWithRankCapacityFactor",
            {{"num_experts", 4},
             {"expert_model_parallel_size", 2},
             {"moe_token_dispatcher_type", "alltoall"},
             {"moe_grouped_gemm", true},
             {"moe_expert_rank_capacity_factor", 2.0},
             {"cuda_graph_impl", "full_iteration"}},
            2,
            "G7",
            Severity::kNote,
            "--cuda-graph-impl full_iteration with --moe-expert-rank-capacity-factor 2: the graphs hold the "
            "fixed expert blocks; after each iteration's backward one host read checks every rank for an "
            "overflowed block, and an iteration that overflowed one runs again eagerly and dropless before the "
            "optimizer step (so the optimizer step is not in the full-iteration graph: it has a graph of its own "
            "with --optimizer-cuda-graph); evaluation runs eagerly"},
        LaunchCase{"G7LayerGraphsWithRankCapacityFactor",
                   {{"num_experts", 4},
                    {"expert_model_parallel_size", 2},
                    {"moe_token_dispatcher_type", "alltoall"},
                    {"moe_grouped_gemm", true},
                    {"moe_expert_rank_capacity_factor", 0.5},
                    {"cuda_graph_impl", "transformer_engine"}},
                   2,
                   "G7",
                   Severity::kNote,
                   "--cuda-graph-impl transformer_engine with --moe-expert-rank-capacity-factor 0.5: the graphs hold "
                   "the fixed expert blocks; after each iteration's backward one host read checks every rank for an "
                   "overflowed block, and an iteration that overflowed one runs again eagerly and dropless before the "
                   "optimizer step"},
        LaunchCase{"PL7VocabularyDoesNotSplit",
                   {{"tensor_model_parallel_size", 2}, {"vocab_size", 1001}},
                   2,
                   "PL-7",
                   Severity::kError,
                   "--vocab-size 1001 does not split over --tensor-model-parallel-size 2 (each rank takes an equal "
                   "part); fix: pass --vocab-size 1002 (padded, as Megatron pads the vocabulary; a checkpoint of the "
                   "unpadded model then no longer loads)"},
        LaunchCase{"PL10DropoutUnderTensorParallelism",
                   {{"tensor_model_parallel_size", 2}, {"hidden_dropout", 0.1}, {"attention_dropout", 0.0}},
                   2,
                   "PL-10",
                   Severity::kNote,
                   "--tensor-model-parallel-size 2 with dropout (--attention-dropout 0, --hidden-dropout 0.1): as "
                   "Megatron's model-parallel random states, attention's dropout (each rank holds its heads) draws "
                   "from --seed + 2718 + the tensor rank, so the masks differ from one GPU's and the losses follow "
                   "another curve"},
        LaunchCase{
            "PL7SequenceDoesNotSplit",
            {{"tensor_model_parallel_size", 2}, {"sequence_parallel", true}, {"seq_length", 63}},
            2,
            "PL-7",
            Severity::kError,
            "--seq-length 63 does not split over --tensor-model-parallel-size 2 (each rank takes an equal part); "
            "fix: pass a multiple of 2 (--sequence-parallel gives each rank an equal part of the sequence), or "
            "drop --sequence-parallel"},
        LaunchCase{"PL9SequenceParallelAlone",
                   {{"sequence_parallel", true}},
                   1,
                   "PL-9",
                   Severity::kNote,
                   "--sequence-parallel has no effect with --tensor-model-parallel-size 1 (it splits the sequence over "
                   "the tensor-parallel ranks); it is ignored"},
        LaunchCase{"PL7ExpertFfnDoesNotSplit",
                   {{"tensor_model_parallel_size", 2}, {"num_experts", 4}, {"moe_ffn_hidden_size", 129}},
                   2,
                   "PL-7",
                   Severity::kError,
                   "--moe-ffn-hidden-size 129 does not split over --tensor-model-parallel-size 2 (each rank takes an "
                   "equal part); fix: pass a multiple of 2"},
        LaunchCase{"PL7MambaHeadsDoNotSplit",
                   {{"tensor_model_parallel_size", 2},
                    {"is_hybrid_model", true},
                    {"hybrid_override_pattern", "M*"},
                    {"num_layers", 2},
                    {"hidden_size", 96},
                    {"mamba_head_dim", 64},
                    {"mamba_num_groups", 1}},
                   2,
                   "PL-7",
                   Severity::kError,
                   "the 3 Mamba heads (2 x --hidden-size 96 / --mamba-head-dim 64) do not split over "
                   "--tensor-model-parallel-size 2 (each rank takes an equal part of the Mamba heads and groups); "
                   "fix: pass a tensor size that divides 3, or set --mamba-num-heads to a multiple of 2"},
        LaunchCase{"PL7MambaNumHeadsDoNotSplit",
                   {{"tensor_model_parallel_size", 2},
                    {"is_hybrid_model", true},
                    {"hybrid_override_pattern", "M*"},
                    {"num_layers", 2},
                    {"mamba_num_heads", 5},
                    {"mamba_num_groups", 1}},
                   2,
                   "PL-7",
                   Severity::kError,
                   "--mamba-num-heads 5 does not split over --tensor-model-parallel-size 2 (each rank takes an equal "
                   "part of the Mamba heads and groups); fix: pass a tensor size that divides 5, or a multiple of 2 "
                   "heads"},
        LaunchCase{"PL7MambaGroupsDoNotSplit",
                   {{"tensor_model_parallel_size", 2},
                    {"is_hybrid_model", true},
                    {"hybrid_override_pattern", "M*"},
                    {"num_layers", 2},
                    {"mamba_head_dim", 32},
                    {"mamba_num_groups", 1}},
                   2,
                   "PL-7",
                   Severity::kError,
                   "--mamba-num-groups 1 does not split over --tensor-model-parallel-size 2 (each rank takes an equal "
                   "part of the Mamba heads and groups); fix: pass a group count that is a multiple of 2 and divides "
                   "the 8 heads, or a tensor size that divides 1"},
        LaunchCase{"PL1PipelineZero",
                   {{"pipeline_model_parallel_size", 0}},
                   1,
                   "PL-1",
                   Severity::kError,
                   "--pipeline-model-parallel-size must be >= 1, got 0; fix: pass a positive value"},
        LaunchCase{"PL1TimeoutZero",
                   {{"distributed_timeout_minutes", 0}},
                   1,
                   "PL-1",
                   Severity::kError,
                   "--distributed-timeout-minutes must be >= 1, got 0; fix: pass a positive value"},
        LaunchCase{"PL2WorldNotAMultiple",
                   {{"pipeline_model_parallel_size", 2}},
                   3,
                   "PL-2",
                   Severity::kError,
                   "the launch has 3 process(es) (WORLD_SIZE), which is not a multiple of --tensor-model-parallel-size "
                   "x --pipeline-model-parallel-size = 2; fix: launch a multiple of 2 processes (torchrun "
                   "--nproc-per-node) or change the pipeline size"},
        LaunchCase{"PL2FewerProcessesThanStages",
                   {{"pipeline_model_parallel_size", 2}},
                   1,
                   "PL-2",
                   Severity::kError,
                   "the launch has 1 process(es) (WORLD_SIZE), which is not a multiple of --tensor-model-parallel-size "
                   "x --pipeline-model-parallel-size = 2; fix: launch a multiple of 2 processes (torchrun "
                   "--nproc-per-node) or change the pipeline size"},
        LaunchCase{"PL2DataParallelDisagrees",
                   {{"pipeline_model_parallel_size", 2}, {"data_parallel_size", 1}, {"num_layers", 4}},
                   4,
                   "PL-2",
                   Severity::kError,
                   "--data-parallel-size 1 disagrees with the launch: 4 process(es) / (tensor x pipeline size 2) = 2; "
                   "fix: drop --data-parallel-size (it follows from the launch) or launch 2 processes"},
        LaunchCase{"PL3LayersDoNotSplit",
                   {{"pipeline_model_parallel_size", 2}, {"num_layers", 3}},
                   2,
                   "PL-3",
                   Severity::kError,
                   "--num-layers 3 does not split evenly over --pipeline-model-parallel-size 2; fix: pass a stage "
                   "count that divides 3 or a layer count that is a multiple of 2"},
        LaunchCase{"PL4VirtualWithoutPipeline",
                   {{"num_layers_per_virtual_pipeline_stage", 1}},
                   1,
                   "PL-4",
                   Severity::kError,
                   "--num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size 2 or more (the "
                   "interleaved schedule), got 1; fix: drop it, or pass more pipeline stages"},
        LaunchCase{"PL5VirtualDoesNotDivide", merged(kTwoStagesOfFour, {{"num_layers_per_virtual_pipeline_stage", 3}}),
                   2, "PL-5", Severity::kError,
                   "--num-layers-per-virtual-pipeline-stage 3 does not divide the 4 layers of each of the 2 pipeline "
                   "stages; fix: pass a divisor of 4"},
        LaunchCase{"PL5VirtualZero", merged(kTwoStagesOfFour, {{"num_layers_per_virtual_pipeline_stage", 0}}), 2,
                   "PL-5", Severity::kError,
                   "--num-layers-per-virtual-pipeline-stage 0 does not divide the 4 layers of each of the 2 pipeline "
                   "stages; fix: pass a divisor of 4"},
        LaunchCase{"PL5OneVirtualStageIsOneFOneB",
                   merged(kTwoStagesOfFour, {{"num_layers_per_virtual_pipeline_stage", 4}}), 2, "PL-5", Severity::kNote,
                   "--num-layers-per-virtual-pipeline-stage 4 puts all 4 layers of a stage in one virtual stage: the "
                   "schedule is 1F1B"},
        LaunchCase{"PL6FullIterationPipeline",
                   {{"pipeline_model_parallel_size", 2}, {"cuda_graph_impl", "full_iteration"}},
                   2,
                   "PL-6",
                   Severity::kError,
                   "--cuda-graph-impl full_iteration with --pipeline-model-parallel-size 2 is not supported in this "
                   "version (the pipeline's sends and receives would sit inside one graph per stage); fix: "
                   "--cuda-graph-impl local or transformer_engine, which graph each (layer, microbatch) between the "
                   "transfers"}),
    [](const ::testing::TestParamInfo<LaunchCase>& info) { return info.param.name; });

TEST(ValidationTest, AValidParallelLaunchHasNoParallelIssue) {
  for (const auto& [settings, world_size] : std::vector<std::pair<json, int64_t>>{
           {json::object(), 1},
           {json::object(), 4},
           {kTwoStagesOfFour, 4},
           {merged(kTwoStagesOfFour, {{"num_layers_per_virtual_pipeline_stage", 2}}), 2},
           {{{"pipeline_model_parallel_size", 2}, {"num_layers", 4}, {"data_parallel_size", 2}}, 4},
           {{{"pipeline_model_parallel_size", 2}, {"cuda_graph_impl", "local"}}, 2},
           {{{"save", "checkpoints"}, {"load", "checkpoints"}}, 2},
           // Mamba layers split by their heads and groups, also with --sequence-parallel.
           {{{"tensor_model_parallel_size", 2},
             {"sequence_parallel", true},
             {"is_hybrid_model", true},
             {"hybrid_override_pattern", "M*"},
             {"num_layers", 2},
             {"mamba_head_dim", 32},
             {"mamba_num_groups", 2},
             {"attention_dropout", 0.0},
             {"hidden_dropout", 0.0},
             {"sample_tokens", 0}},  // no PL-10 and PL-11 notes
            2}}) {
    const Resolution resolution = resolve_launched(settings, world_size);
    for (const auto& issue : resolution.issues.all()) {
      EXPECT_NE(issue.rule.rfind("PL-", 0), 0u)
          << settings.dump() << " on " << world_size << ": " << format_issue(issue);
    }
  }
}

TEST(ValidationTest, TheDataParallelSizeFollowsTheLaunch) {
  EXPECT_EQ(resolve_launched(json::object(), 4).config.train.data_parallel_size, 4);
  EXPECT_EQ(resolve_launched(kTwoStagesOfFour, 4).config.train.data_parallel_size, 2);
  // TR-2's global batch default is micro batch x data-parallel size.
  EXPECT_EQ(resolve_launched({{"micro_batch_size", 2}}, 4).config.train.global_batch_size, 8);
}

/// A RoPE model trained on 128 positions under a preset's 64 serves the 128 it was trained on: resolution raises
/// its context (tests/train/checkpoint_test.cpp loads a checkpoint saved with the smaller one).
TEST(ValidationTest, ARopeModelsContextIsTheSequenceItTrainsOn) {
  const Resolution rope =
      resolve_json({{"position_embedding_type", "rope"}, {"seq_length", 128}, {"max_position_embeddings", 64}});
  EXPECT_EQ(rope.config.model.max_position_embeddings, 128);
  const Resolution learned = resolve_json({{"seq_length", 64}, {"max_position_embeddings", 256}});
  EXPECT_EQ(learned.config.model.max_position_embeddings, 256);
}

TEST(ValidationTest, DefaultsAreValidWithoutAnyIssue) {
  const Resolution resolution = resolve_json(json::object());
  for (const auto& issue : resolution.issues.all()) ADD_FAILURE() << format_issue(issue);
}

TEST(ValidationTest, EveryErrorIsReportedNotJustTheFirst) {
  const Resolution resolution =
      resolve_json({{"num_layers", 0}, {"micro_batch_size", 0}, {"cuda_graph_warmup_steps", 0}});
  EXPECT_TRUE(resolution.issues.contains("MC-1"));
  EXPECT_TRUE(resolution.issues.contains("TR-1"));
  EXPECT_TRUE(resolution.issues.contains("G1"));
  try {
    Settings settings;
    apply_settings(settings, {{"num_layers", 0}, {"micro_batch_size", 0}}, "test");
    resolve_run_config_or_throw(settings);
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_STREQ(error.what(), "invalid configuration (2 errors)");
    ASSERT_EQ(error.details().size(), 2u);
    EXPECT_EQ(error.details()[0], "error [MC-1]: --num-layers must be >= 1, got 0; fix: pass a positive value");
  }
}

TEST(ValidationTest, DerivedValuesFollowMegatron) {
  const RunConfig plain = resolve_json({{"hidden_size", 256}}).config;
  EXPECT_EQ(plain.model.ffn_hidden_size, 1024);
  EXPECT_EQ(plain.model.num_query_groups, 2);
  EXPECT_EQ(plain.model.max_position_embeddings, 64);
  EXPECT_EQ(plain.train.global_batch_size, 1);
  EXPECT_EQ(plain.train.lr_decay_iters, 200);
  const RunConfig swiglu = resolve_json({{"hidden_size", 256}, {"swiglu", true}}).config;
  EXPECT_EQ(swiglu.model.ffn_hidden_size, 640);  // int(4*256*2/3 / 64) * 64
  const RunConfig micro = resolve_json({{"micro_batch_size", 2}, {"global_batch_size", 8}}).config;
  EXPECT_EQ(micro.num_microbatches(), 4);
  const RunConfig selective = resolve_json({{"recompute_granularity", "selective"}}).config;
  EXPECT_EQ(selective.model.recompute_modules, std::vector<std::string>{"core_attn"});
}

TEST(ValidationTest, MoeLayerPatternExpands) {
  EXPECT_EQ(parse_moe_layer_pattern("1", 3), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(parse_moe_layer_pattern("2", 4), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(parse_moe_layer_pattern("[0,1,1]", 3), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(parse_moe_layer_pattern("0,1", 2), (std::vector<bool>{false, true}));
  EXPECT_EQ(parse_moe_layer_pattern("0", 2), std::nullopt);
  EXPECT_EQ(parse_moe_layer_pattern("1,2", 2), std::nullopt);
  EXPECT_EQ(parse_moe_layer_pattern("x", 2), std::nullopt);
}

TEST(ValidationTest, RuleIdsAreUnique) {
  std::set<std::string> ids;
  for (const auto& rule : all_rules()) EXPECT_TRUE(ids.insert(rule.id).second) << rule.id;
}

}  // namespace
}  // namespace graphed::config
