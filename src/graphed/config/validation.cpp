// config/validation.cpp — the rules of config/validation.h. Each check is one rule with one
// message: what is wrong, the values, and "; fix: ...". Ids: TC-*/VA-*/BR-* follow
// research/megatron-cudagraphs.md §1.7–1.10; G* are graphed's graph rules, MC-* model, TR-* training,
// PL-* parallel layout.
#include "graphed/config/validation.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "graphed/config/fp8_rules.h"
#include "graphed/config/hybrid_rules.h"
#include "graphed/config/parallel_rules.h"
#include "graphed/config/run_config.h"
#include "graphed/config/settings.h"
#include "graphed/util/text.h"

namespace graphed::config {
namespace {

std::string num(double value) { return format_number(value); }
std::string num(int64_t value) { return std::to_string(value); }

bool contains(const std::optional<std::vector<std::string>>& list, const std::string& item) {
  return list && std::find(list->begin(), list->end(), item) != list->end();
}

// ---- numbers ----------------------------------------------------------------------------------

/// FL-1: every float setting is a finite number. The range rules compare with < and >, which NaN
/// passes, so this runs first and they run only when it finds nothing. Returns whether all are finite.
bool validate_finite(const RunConfig& config, IssueList& issues) {
  bool finite = true;
  const nlohmann::json values = run_config_to_json(config);
  const nlohmann::json defaults = settings_to_json(Settings{});
  for (const auto& spec : setting_specs()) {
    if (spec.kind != SettingKind::kFloat || !values.contains(spec.key)) continue;
    const nlohmann::json& value = values[spec.key];
    if (!value.is_number() || std::isfinite(value.get<double>())) continue;
    const nlohmann::json& fallback = defaults[spec.key];
    finite = false;
    issues.error("FL-1", spec.flag() + " must be a finite number, got " + num(value.get<double>()) + "; fix: pass a " +
                             "finite value" +
                             (fallback.is_number() ? " (default " + num(fallback.get<double>()) + ")" : std::string()));
  }
  return finite;
}

// ---- model ----------------------------------------------------------------------------------

void require_positive(IssueList& issues, const std::string& rule, const std::string& flag, int64_t value) {
  if (value < 1) issues.error(rule, flag + " must be >= 1, got " + num(value) + "; fix: pass a positive value");
}

/// MC-1 (sizes >= 1), MC-2 and MC-3 (heads divide the hidden size, groups divide the heads).
void validate_model_sizes(const ModelConfig& m, IssueList& issues) {
  require_positive(issues, "MC-1", "--num-layers", m.num_layers);
  require_positive(issues, "MC-1", "--hidden-size", m.hidden_size);
  require_positive(issues, "MC-1", "--num-attention-heads", m.num_attention_heads);
  require_positive(issues, "MC-1", "--seq-length", m.seq_length);
  require_positive(issues, "MC-1", "--vocab-size", m.vocab_size);
  if (m.swiglu && m.ffn_hidden_size.value_or(1) == 0) {
    issues.error("MC-1",
                 "--ffn-hidden-size must be >= 1, got 0 (with --swiglu an unset --ffn-hidden-size is "
                 "int(8/3 x hidden / 64) x 64, which is 0 below --hidden-size 24); fix: pass --ffn-hidden-size");
  } else {
    require_positive(issues, "MC-1", "--ffn-hidden-size", m.ffn_hidden_size.value_or(1));
  }
  require_positive(issues, "MC-1", "--num-query-groups", m.num_query_groups.value_or(1));
  require_positive(issues, "MC-1", "--max-position-embeddings", m.max_position_embeddings.value_or(1));
  require_positive(issues, "MC-1", "--kv-channels", m.kv_channels.value_or(1));
  // With --kv-channels the head size is given, so the hidden size need not split into heads (Megatron).
  if (!m.kv_channels && m.hidden_size >= 1 && m.num_attention_heads >= 1 &&
      m.hidden_size % m.num_attention_heads != 0) {
    issues.error("MC-2", "--hidden-size " + num(m.hidden_size) + " is not divisible by --num-attention-heads " +
                             num(m.num_attention_heads) + "; fix: pick a head count that divides the hidden size");
  }
  const int64_t groups = m.num_query_groups.value_or(m.num_attention_heads);
  if (groups >= 1 && m.num_attention_heads % groups != 0) {
    issues.error("MC-3", "--num-attention-heads " + num(m.num_attention_heads) +
                             " is not divisible by --num-query-groups " + num(groups) +
                             "; fix: pick a group count that divides the head count");
  }
}

/// MC-4 (RoPE needs an even head size), MC-10 (learned positions cover the sequence) and MC-17
/// (the RoPE scaling factor).
void validate_positions(const ModelConfig& m, IssueList& issues) {
  const bool rope = m.position_embedding_type == PositionEmbedding::kRope;
  if (rope && m.kv_channels && *m.kv_channels % 2 != 0) {
    issues.error("MC-4", "--position-embedding-type rope needs an even head size, got --kv-channels " +
                             num(*m.kv_channels) + "; fix: pass an even --kv-channels, or use learned_absolute");
  } else if (rope && !m.kv_channels && m.num_attention_heads >= 1 && (m.hidden_size / m.num_attention_heads) % 2 != 0) {
    issues.error("MC-4", "--position-embedding-type rope needs an even head size, got " +
                             num(m.hidden_size / m.num_attention_heads) + " (--hidden-size " + num(m.hidden_size) +
                             " / --num-attention-heads " + num(m.num_attention_heads) +
                             "); fix: choose sizes with an even hidden / heads, or use learned_absolute");
  }
  if (rope && m.use_rope_scaling && m.rope_scaling_factor <= 0.0) {
    issues.error("MC-17", "--rope-scaling-factor must be > 0, got " + num(m.rope_scaling_factor) +
                              "; fix: pass the factor the model was trained with (Llama 3.1: 8, Llama 3.2: 32)");
  }
  if (m.position_embedding_type == PositionEmbedding::kLearnedAbsolute && m.max_position_embeddings &&
      *m.max_position_embeddings < m.seq_length) {
    issues.error("MC-10", "--seq-length " + num(m.seq_length) + " exceeds --max-position-embeddings " +
                              num(*m.max_position_embeddings) +
                              "; fix: raise --max-position-embeddings or shorten --seq-length");
  }
}

/// MC-14, MC-5 (experts and top-k), MC-1 (MoE widths), MC-6, MC-7 (capacity) and MC-8 (layer pattern).
void validate_model_moe(const ModelConfig& m, IssueList& issues) {
  if (m.num_experts) {
    if (*m.num_experts < 2) {
      issues.error("MC-14", "--num-experts " + num(*m.num_experts) +
                                " makes no MoE layer (an MoE layer needs 2 or more experts); fix: drop "
                                "--num-experts for a dense model or pass 2 or more");
    } else if (m.moe_router_topk < 1 || m.moe_router_topk > *m.num_experts) {
      issues.error("MC-5", "--moe-router-topk " + num(m.moe_router_topk) + " must be between 1 and --num-experts " +
                               num(*m.num_experts) + "; fix: pass a top-k in that range");
    }
  }
  if (m.is_moe()) {
    require_positive(issues, "MC-1", "--moe-ffn-hidden-size", m.moe_ffn_hidden_size.value_or(1));
    require_positive(issues, "MC-1", "--moe-shared-expert-intermediate-size",
                     m.moe_shared_expert_intermediate_size.value_or(1));
    if (m.moe_shared_expert_gate && !m.moe_shared_expert_intermediate_size) {
      issues.error("MC-21",
                   "--moe-shared-expert-gate gates a shared expert, and there is none; fix: add "
                   "--moe-shared-expert-intermediate-size (e.g. the --moe-ffn-hidden-size) or drop "
                   "--moe-shared-expert-gate");
    }
    if (m.moe_pad_expert_input_to_capacity && !m.moe_expert_capacity_factor) {
      issues.error("MC-6",
                   "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor; fix: set "
                   "--moe-expert-capacity-factor (e.g. 1.0) or drop --moe-pad-expert-input-to-capacity");
    }
    if (m.moe_expert_capacity_factor && *m.moe_expert_capacity_factor <= 0.0) {
      issues.error("MC-7", "--moe-expert-capacity-factor must be > 0, got " + num(*m.moe_expert_capacity_factor) +
                               "; fix: pass e.g. 1.0, or leave it unset for dropless MoE");
    }
    if (m.moe_expert_rank_capacity_factor && *m.moe_expert_rank_capacity_factor <= 0.0) {
      issues.error("MC-23", "--moe-expert-rank-capacity-factor must be > 0, got " +
                                num(*m.moe_expert_rank_capacity_factor) +
                                "; fix: pass e.g. 2 (a multiple of the even share of rows a rank may receive; at least "
                                "the expert-parallel size never overflows), or drop it");
    } else if (m.moe_expert_rank_capacity_factor && m.fp8() && m.fp8_recipe == "delayed") {
      issues.error("MC-26",
                   "--moe-expert-rank-capacity-factor with --fp8-recipe delayed is not supported in this "
                   "version (an iteration that overflows a block runs again, and its layers would record "
                   "their amaxes twice); fix: --fp8-recipe tensorwise, or drop "
                   "--moe-expert-rank-capacity-factor");
    } else if (m.moe_expert_rank_capacity_factor && !m.is_grouped_dropless()) {
      issues.error("MC-24",
                   "--moe-expert-rank-capacity-factor needs dropless grouped experts (--moe-grouped-gemm "
                   "without drop-and-pad); fix: add --moe-grouped-gemm and drop "
                   "--moe-pad-expert-input-to-capacity, or drop --moe-expert-rank-capacity-factor");
    }
    if (!parse_moe_layer_pattern(m.moe_layer_freq, m.num_layers)) {
      issues.error("MC-8", "--moe-layer-freq '" + m.moe_layer_freq + "' is neither a positive integer nor a list of " +
                               num(m.num_layers) +
                               " zeros and ones (one per layer); fix: e.g. --moe-layer-freq 2 or "
                               "--moe-layer-freq 1,0,1,0");
    }
  }
}

void validate_model(const RunConfig& config, IssueList& issues) {
  const ModelConfig& m = config.model;
  validate_model_sizes(m, issues);
  validate_positions(m, issues);
  for (const auto& [flag, value] : {std::pair<std::string, double>{"--attention-dropout", m.attention_dropout},
                                    {"--hidden-dropout", m.hidden_dropout}}) {
    if (value < 0.0 || value >= 1.0) {
      issues.error("MC-9", flag + " must be in [0, 1), got " + num(value) + "; fix: pass e.g. 0 or 0.1");
    }
  }
  if (m.norm_epsilon <= 0.0 || m.init_method_std <= 0.0) {
    issues.error("MC-1", "--norm-epsilon and --init-method-std must be > 0, got " + num(m.norm_epsilon) + " and " +
                             num(m.init_method_std) + "; fix: pass positive values (defaults 1e-05 and 0.02)");
  }
  if (m.rotary_base <= 0.0) {
    issues.error("MC-15", "--rotary-base must be > 0, got " + num(m.rotary_base) + "; fix: pass e.g. 10000");
  }
  if (m.moe_aux_loss_coeff < 0.0) {
    issues.error("MC-16", "--moe-aux-loss-coeff must be >= 0, got " + num(m.moe_aux_loss_coeff) +
                              "; fix: pass 0 to turn the auxiliary loss off, or e.g. 0.01");
  }
  validate_model_moe(m, issues);
  if (m.recompute_granularity == std::optional<std::string>("full") && !m.recompute_method) {
    issues.error("MC-13",
                 "--recompute-granularity full needs --recompute-method; fix: add --recompute-method "
                 "uniform or --recompute-method block");
  }
  if (m.recompute_num_layers) require_positive(issues, "MC-1", "--recompute-num-layers", *m.recompute_num_layers);
}

// ---- training -------------------------------------------------------------------------------

bool valid_split(const std::string& text) {
  const auto pieces = split(text, ',');
  if (pieces.empty() || pieces.size() > 3) return false;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    char* end = nullptr;
    const double weight = std::strtod(pieces[i].c_str(), &end);
    if (*end != '\0' || !std::isfinite(weight) || weight < 0.0 || (i == 0 && weight <= 0.0)) return false;
  }
  return true;
}

void validate_train(const RunConfig& config, IssueList& issues) {
  const TrainConfig& t = config.train;
  require_positive(issues, "TR-1", "--micro-batch-size", t.micro_batch_size);
  // An unset global batch is derived from the micro batch: report it only when the user set it.
  if (t.micro_batch_size >= 1) require_positive(issues, "TR-1", "--global-batch-size", t.global_batch_size.value_or(1));
  require_positive(issues, "TR-1", "--train-iters", t.train_iters);
  require_positive(issues, "TR-1", "--log-interval", t.log_interval);
  require_positive(issues, "TR-1", "--eval-interval", t.eval_interval);
  if (t.eval_iters < 0) {
    issues.error("TR-1", "--eval-iters must be >= 0, got " + num(t.eval_iters) + "; fix: pass 0 to skip evaluation");
  }
  const int64_t data_parallel = t.data_parallel_size.value_or(1);
  const int64_t per_step = t.micro_batch_size * data_parallel;
  if (per_step >= 1 && t.global_batch_size && *t.global_batch_size >= 1 && *t.global_batch_size % per_step != 0) {
    issues.error("TR-2", "--global-batch-size " + num(*t.global_batch_size) +
                             " is not a multiple of --micro-batch-size " + num(t.micro_batch_size) +
                             " x data-parallel size " + num(data_parallel) + "; fix: pass a multiple of " +
                             num(per_step));
  }
  if (t.lr < 0.0 || t.min_lr < 0.0 || t.min_lr > t.lr) {
    issues.error("TR-3", "--lr and --min-lr must satisfy 0 <= --min-lr <= --lr, got --lr " + num(t.lr) +
                             " and --min-lr " + num(t.min_lr) + "; fix: lower --min-lr or raise --lr");
  }
  const int64_t decay = t.lr_decay_iters.value_or(t.train_iters);
  if (t.lr_warmup_iters < 0 || t.lr_warmup_iters > decay) {
    issues.error("TR-4", "--lr-warmup-iters " + num(t.lr_warmup_iters) + " must be between 0 and --lr-decay-iters " +
                             num(decay) + " (unset = --train-iters); fix: shorten the warmup or lengthen the decay");
  }
  if (t.mock_data && t.data_path) {
    issues.error("TR-5", "--mock-data and --data-path " + *t.data_path +
                             " cannot both be set; fix: keep --data-path for real data or --mock-data for "
                             "synthetic tokens");
  }
  if (t.save_interval) {
    require_positive(issues, "TR-1", "--save-interval", *t.save_interval);
    if (!t.save) issues.error("TR-6", "--save-interval needs --save; fix: pass --save DIR or drop --save-interval");
  }
  if (!valid_split(t.split)) {
    issues.error("TR-7", "--split '" + t.split +
                             "' must be up to three comma-separated non-negative weights with "
                             "a positive first (train) weight; fix: e.g. --split 969,30,1");
  }
  if (t.sample_tokens < 0 || t.sample_top_k < 0 || t.sample_temperature < 0.0) {
    issues.error("TR-9", "--sample-tokens " + num(t.sample_tokens) + ", --sample-top-k " + num(t.sample_top_k) +
                             " and --sample-temperature " + num(t.sample_temperature) +
                             " must be >= 0; fix: pass 0 for no sample, all tokens or greedy decoding");
  }
  if (t.sample_tokens > 0 && t.sample_prompt.empty()) {
    issues.error("TR-9",
                 "--sample-prompt is empty, but a sample continues a prompt; fix: pass at least one "
                 "character (e.g. --sample-prompt \"The \"), or --sample-tokens 0 for no samples");
  }
  if (t.adam_beta1 < 0.0 || t.adam_beta1 >= 1.0 || t.adam_beta2 < 0.0 || t.adam_beta2 >= 1.0 || t.adam_eps <= 0.0 ||
      t.weight_decay < 0.0 || t.clip_grad < 0.0) {
    issues.error("TR-8", "AdamW settings out of range: --adam-beta1 " + num(t.adam_beta1) + " and --adam-beta2 " +
                             num(t.adam_beta2) + " must be in [0, 1), --adam-eps " + num(t.adam_eps) +
                             " > 0, --weight-decay " + num(t.weight_decay) + " and --clip-grad " + num(t.clip_grad) +
                             " >= 0; fix: e.g. the defaults 0.9, 0.999, 1e-08, 0.01, 1");
  }
}

// ---- CUDA graphs ----------------------------------------------------------------------------

std::string dropless_reason(const ModelConfig& m) {
  return std::string(m.moe_expert_capacity_factor ? "--moe-pad-expert-input-to-capacity is off"
                                                  : "--moe-expert-capacity-factor is unset") +
         " and --moe-grouped-gemm is off";
}

void validate_moe_modules(const RunConfig& config, IssueList& issues) {
  const ModelConfig& m = config.model;
  const CudaGraphConfig& g = config.cuda_graph;
  const std::string mods = to_string(g.modules);
  const bool moe = g.has_module(CudaGraphModule::kMoe);
  const bool router = g.has_module(CudaGraphModule::kMoeRouter);
  const bool preprocess = g.has_module(CudaGraphModule::kMoePreprocess);
  if (moe && router) {
    issues.error("TC-9",
                 "--cuda-graph-modules must not contain both moe and moe_router, got " + mods +
                     "; fix: use moe to graph the whole MoE MLP (drop-and-pad or --moe-grouped-gemm) or moe_router "
                     "[moe_preprocess] to graph the router");
  }
  if (preprocess && !router) {
    issues.error("TC-10",
                 "--cuda-graph-modules moe_preprocess needs moe_router, got " + mods + "; fix: add moe_router");
  }
  if ((moe || router) && !m.is_moe()) {
    issues.error("TC-11", "--cuda-graph-modules " + std::string(moe ? "moe" : "moe_router") +
                              " needs an MoE model, but --num-experts is " +
                              (m.num_experts ? num(*m.num_experts) : std::string("unset")) +
                              "; fix: drop it from --cuda-graph-modules or set --num-experts");
  }
  if (!m.is_moe()) return;
  const bool all_moe = std::all_of(config.moe_layers.begin(), config.moe_layers.end(), [](bool b) { return b; });
  if (g.has_module(CudaGraphModule::kMlp) && all_moe) {
    issues.error("TC-12", "--cuda-graph-modules mlp needs dense layers, but every layer is MoE (--moe-layer-freq " +
                              m.moe_layer_freq +
                              "); fix: graph moe (drop-and-pad or --moe-grouped-gemm) or moe_router instead of mlp");
  }
  if (moe && !m.has_static_moe_shapes()) {
    issues.error("TC-13", "--cuda-graph-modules moe needs static MoE shapes, but " + dropless_reason(m) +
                              "; fix: pass --moe-grouped-gemm (dropless), or set --moe-expert-capacity-factor and "
                              "--moe-pad-expert-input-to-capacity, or graph moe_router moe_preprocess instead");
  }
  if (preprocess && !m.is_drop_and_pad() && m.moe_token_dispatcher_type == "alltoall" && m.moe_expert_capacity_factor) {
    issues.error("TC-14",
                 "--cuda-graph-modules moe_preprocess cannot be graphed with --moe-token-dispatcher-type "
                 "alltoall and --moe-expert-capacity-factor " +
                     num(*m.moe_expert_capacity_factor) +
                     " without padding: the preprocess step copies to the host and synchronizes; fix: drop "
                     "moe_preprocess, add --moe-pad-expert-input-to-capacity, or use allgather");
  }
  if (g.is_per_layer() && g.modules.empty() && !m.has_static_moe_shapes()) {
    issues.error("G2", "whole-layer capture (--cuda-graph-impl " + to_string(g.impl) +
                           " without --cuda-graph-modules) needs static shapes, but MoE layers are dropless (" +
                           dropless_reason(m) +
                           "); fix: pass --moe-grouped-gemm, or --cuda-graph-modules attn moe_router "
                           "moe_preprocess, or make MoE drop-and-pad with --moe-expert-capacity-factor and "
                           "--moe-pad-expert-input-to-capacity");
  }
  if (g.impl == CudaGraphImpl::kFullIteration && !m.has_static_moe_shapes()) {
    issues.error("G3", "--cuda-graph-impl full_iteration needs static shapes, but MoE layers are dropless (" +
                           dropless_reason(m) +
                           "); fix: pass --moe-grouped-gemm (dropless, static shapes), or make MoE drop-and-pad "
                           "with --moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity, or use "
                           "--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_router moe_preprocess");
  }
  const bool graphs_experts = moe || g.impl == CudaGraphImpl::kFullIteration || (g.is_per_layer() && g.modules.empty());
  const bool static_blocks = m.moe_expert_rank_capacity_factor.has_value();
  if (graphs_experts && config.train.expert_model_parallel_size > 1 && m.is_grouped_dropless() && static_blocks) {
    issues.note("G7", "--cuda-graph-impl " + to_string(g.impl) + " with --moe-expert-rank-capacity-factor " +
                          num(*m.moe_expert_rank_capacity_factor) +
                          ": the graphs hold the fixed expert blocks; after each iteration's backward one host read "
                          "checks every rank for an overflowed block, and an iteration that overflowed one runs again "
                          "eagerly and dropless before the optimizer step" +
                          (g.impl == CudaGraphImpl::kFullIteration
                               ? std::string(" (so the optimizer step is not in the full-iteration graph: it has a "
                                             "graph of its own with --optimizer-cuda-graph); evaluation runs eagerly")
                               : std::string()));
  } else if (graphs_experts && config.train.expert_model_parallel_size > 1 && m.is_grouped_dropless()) {
    issues.error("G6", "--cuda-graph-impl " + to_string(g.impl) +
                           (g.modules.empty() ? std::string() : " --cuda-graph-modules " + mods) +
                           " graphs the experts, which needs static shapes, but with --expert-model-parallel-size " +
                           num(config.train.expert_model_parallel_size) +
                           " dropless MoE reads on the host how many tokens each rank receives; fix: make MoE "
                           "drop-and-pad (--moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity), or "
                           "graph attn moe_router moe_preprocess only (--cuda-graph-impl transformer_engine)");
  }
}

void validate_recompute(const RunConfig& config, IssueList& issues) {
  const ModelConfig& m = config.model;
  const CudaGraphConfig& g = config.cuda_graph;
  if (g.impl == CudaGraphImpl::kNone) return;
  if (m.recompute_granularity == std::optional<std::string>("full") && g.impl != CudaGraphImpl::kFullIteration) {
    issues.error("TC-15",
                 "--recompute-granularity full needs --cuda-graph-impl full_iteration, got --cuda-graph-impl " +
                     to_string(g.impl) +
                     "; fix: use --recompute-granularity selective or "
                     "--cuda-graph-impl full_iteration");
  }
  if (m.recompute_granularity != std::optional<std::string>("selective")) return;
  const auto& recomputed = m.recompute_modules;
  if (g.impl == CudaGraphImpl::kTransformerEngine && contains(recomputed, "moe") &&
      g.has_module(CudaGraphModule::kMoeRouter)) {
    issues.error("TC-16",
                 "--recompute-modules moe cannot be combined with --cuda-graph-modules moe_router under "
                 "--cuda-graph-impl transformer_engine; fix: drop moe from --recompute-modules or "
                 "moe_router from --cuda-graph-modules");
  }
  const bool full = g.captures_full_layers();
  if (m.attention_dropout != 0.0 && contains(recomputed, "core_attn") &&
      (full || g.has_module(CudaGraphModule::kAttn))) {
    issues.error("TC-17", "--attention-dropout " + num(m.attention_dropout) +
                              " cannot be used while core_attn is recomputed inside a graph (--recompute-modules "
                              "core_attn with graphed attention); fix: set --attention-dropout 0 or drop core_attn "
                              "from --recompute-modules");
  }
  const bool mlp_graphed = contains(recomputed, "mlp") && (full || g.has_module(CudaGraphModule::kMlp));
  const bool moe_graphed = contains(recomputed, "moe") && (full || g.has_module(CudaGraphModule::kMoe));
  if (m.hidden_dropout != 0.0 && (mlp_graphed || moe_graphed)) {
    issues.error("TC-18", "--hidden-dropout " + num(m.hidden_dropout) + " cannot be used while " +
                              (mlp_graphed ? "mlp" : "moe") +
                              " is recomputed inside a graph; fix: set "
                              "--hidden-dropout 0 or drop it from --recompute-modules");
  }
}

// ---- parallel layout ----------------------------------------------------------------------------

void validate_parallel(const RunConfig& config, IssueList& issues) {
  const TrainConfig& t = config.train;
  require_positive(issues, "PL-1", "--tensor-model-parallel-size", t.tensor_model_parallel_size);
  require_positive(issues, "PL-1", "--pipeline-model-parallel-size", t.pipeline_model_parallel_size);
  require_positive(issues, "PL-1", "--expert-model-parallel-size", t.expert_model_parallel_size);
  if (t.expert_tensor_parallel_size) {
    require_positive(issues, "PL-1", "--expert-tensor-parallel-size", *t.expert_tensor_parallel_size);
  }
  require_positive(issues, "PL-1", "--distributed-timeout-minutes", t.distributed_timeout_minutes);
  validate_parallel_layout(config, issues);  // PL-2 … PL-20 (config/parallel_rules.h)
}

void validate_cuda_graph(const RunConfig& config, IssueList& issues) {
  const CudaGraphConfig& g = config.cuda_graph;
  if (g.warmup_steps < 1) {
    issues.error("G1", "cuda_graph_warmup_steps must be >= 1, got " + num(g.warmup_steps) +
                           "; fix: pass --cuda-graph-warmup-steps 1 or more (default 3)");
  }
  if (g.impl == CudaGraphImpl::kLocal && g.inference_num_cuda_graphs <= 0 && g.inference_num_cuda_graphs != -1) {
    issues.error("VA-8",
                 "--inference-dynamic-batching-num-cuda-graphs must be > 0 or -1 (auto) with "
                 "--cuda-graph-impl local, got " +
                     num(g.inference_num_cuda_graphs) + "; fix: pass a positive count or -1");
  }
  if (g.impl == CudaGraphImpl::kFullIteration && g.check_for_nan_in_loss_and_grad) {
    issues.note("VA-6",
                "--check-for-nan-in-loss-and-grad stays on with --cuda-graph-impl full_iteration: graphed's "
                "NaN check runs on the device inside the graph and is read at log intervals (Megatron "
                "requires --no-check-for-nan-in-loss-and-grad here)");
  }
  if (g.optimizer_cuda_graph && g.impl == CudaGraphImpl::kNone) {
    issues.error("G5",
                 "--optimizer-cuda-graph needs a CUDA-graph implementation, got --cuda-graph-impl none (eager "
                 "training graphs nothing); fix: add --cuda-graph-impl full_iteration, local or "
                 "transformer_engine, or drop --optimizer-cuda-graph");
  }
  if (g.impl == CudaGraphImpl::kNone) return;  // the modules list is kept but graphs nothing (BR-1)
  if (g.has_module(CudaGraphModule::kMamba) && !config.model.has_mamba_layers()) {
    issues.error(
        "G4",
        "--cuda-graph-modules mamba needs Mamba layers, but this model has none (" +
            std::string(config.model.is_hybrid_model
                            ? "its hybrid pattern '" + config.model.hybrid_override_pattern.value_or("") + "' has no M"
                            : "it is not a hybrid model") +
            "); fix: drop mamba from --cuda-graph-modules, or put M layers in --hybrid-override-pattern");
  }
  validate_moe_modules(config, issues);
}

}  // namespace

void validate_run_config(const RunConfig& config, IssueList& issues) {
  if (!validate_finite(config, issues)) return;  // the range rules would repeat FL-1 in other words
  validate_model(config, issues);
  validate_hybrid(config, issues);
  validate_train(config, issues);
  validate_parallel(config, issues);
  validate_cuda_graph(config, issues);
  validate_recompute(config, issues);
  validate_fp8(config, issues);
}

}  // namespace graphed::config
