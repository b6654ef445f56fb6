// config/run_config.cpp — resolution: cuda-graph migration, derived defaults, the normalizing rules
// that change values (TC-8, MC-11, MC-12) and the VA-9 note, then validation.
#include "graphed/config/run_config.h"

#include <algorithm>

#include "graphed/config/hybrid_rules.h"
#include "graphed/config/validation.h"
#include "graphed/util/error.h"

namespace graphed::config {
namespace {

void derive_model(ModelConfig& model, IssueList& issues) {
  if (model.num_query_groups && !model.group_query_attention) {
    issues.warn("MC-11", "--num-query-groups " + std::to_string(*model.num_query_groups) +
                             " has no effect without --group-query-attention; ignored (add "
                             "--group-query-attention to use grouped-query attention)");
  }
  if (!model.group_query_attention || !model.num_query_groups) model.num_query_groups = model.num_attention_heads;
  if (!model.ffn_hidden_size) {
    model.ffn_hidden_size = model.swiglu ? (4 * model.hidden_size * 2 / 3) / 64 * 64 : 4 * model.hidden_size;
  }
  if (!model.max_position_embeddings) model.max_position_embeddings = model.seq_length;
  if (model.position_embedding_type == PositionEmbedding::kRope && *model.max_position_embeddings < model.seq_length) {
    // RoPE has no table of positions to outgrow: the model is trained on --seq-length positions, and that is the
    // context generate and serve must give it (learned positions cannot: MC-10).
    issues.note("MC-20", "--seq-length " + std::to_string(model.seq_length) + " is past --max-position-embeddings " +
                             std::to_string(*model.max_position_embeddings) +
                             " with RoPE: the model's context becomes " + std::to_string(model.seq_length) +
                             ", the positions it trains on (what generate and serve take)");
    model.max_position_embeddings = model.seq_length;
  }
  if (!model.is_moe()) {
    std::vector<std::string> unused;
    if (model.moe_expert_capacity_factor) unused.push_back("--moe-expert-capacity-factor");
    if (model.moe_pad_expert_input_to_capacity) unused.push_back("--moe-pad-expert-input-to-capacity");
    if (model.moe_ffn_hidden_size) unused.push_back("--moe-ffn-hidden-size");
    if (model.moe_shared_expert_intermediate_size) unused.push_back("--moe-shared-expert-intermediate-size");
    if (model.moe_shared_expert_gate) unused.push_back("--moe-shared-expert-gate");
    if (model.moe_router_pre_softmax) unused.push_back("--moe-router-pre-softmax");
    for (const auto& flag : unused) {
      issues.warn("MC-12", flag + " has no effect without --num-experts (dense model); ignored");
    }
  }
  if (model.is_moe() && !model.moe_ffn_hidden_size) model.moe_ffn_hidden_size = model.ffn_hidden_size;
  if (model.use_rope_scaling && model.position_embedding_type != PositionEmbedding::kRope) {
    issues.warn("MC-18", "--use-rope-scaling has no effect without --position-embedding-type rope; ignored");
  }
  if (model.qk_layernorm_across_heads && !model.qk_layernorm) {
    issues.warn("MC-22", "--qk-layernorm-across-heads has no effect without --qk-layernorm; ignored");
  }
  if (model.openai_gelu && model.swiglu) {
    issues.warn("MC-19", "--openai-gelu has no effect with --swiglu (SwiGLU gates with SiLU, not GELU); ignored");
  }
  if (model.recompute_granularity == std::optional<std::string>("selective") && !model.recompute_modules) {
    model.recompute_modules = std::vector<std::string>{"core_attn"};
  }
}

void derive_train(TrainConfig& train) {
  const int64_t model_parallel = train.tensor_model_parallel_size * train.pipeline_model_parallel_size;
  if (!train.data_parallel_size) {
    train.data_parallel_size = model_parallel > 0 ? std::max<int64_t>(1, train.world_size / model_parallel) : 1;
  }
  if (!train.expert_tensor_parallel_size) train.expert_tensor_parallel_size = train.tensor_model_parallel_size;
  if (!train.global_batch_size) train.global_batch_size = train.micro_batch_size * *train.data_parallel_size;
  if (!train.lr_decay_iters) train.lr_decay_iters = train.train_iters;
}

/// Rules that adjust the cuda-graph config rather than reject it.
void normalize_cuda_graph(CudaGraphConfig& graph, IssueList& issues) {
  if (graph.impl == CudaGraphImpl::kLocal) {
    const bool router = graph.has_module(CudaGraphModule::kMoeRouter);
    const bool preprocess = graph.has_module(CudaGraphModule::kMoePreprocess);
    if (router != preprocess) {
      const auto added = router ? CudaGraphModule::kMoePreprocess : CudaGraphModule::kMoeRouter;
      graph.modules.push_back(added);
      issues.note("TC-8", "--cuda-graph-impl local graphs moe_router and moe_preprocess together; added " +
                              to_string(added) + " to --cuda-graph-modules");
    }
  }
}

/// Megatron turns on its graph-safe RNG tracker for any graphs (VA-9). graphed's graphs always register
/// the CUDA generator they draw from, so the flag has nothing to turn on: say so when it is given.
void note_rng_tracker(const CudaGraphInputs& inputs, IssueList& issues) {
  if (!inputs.te_rng_tracker) return;
  issues.note("VA-9",
              "--te-rng-tracker changes nothing in graphed: every CUDA graph registers the random generator "
              "it draws from, so dropout is graph-safe with any --cuda-graph-impl; the flag can be dropped");
}

}  // namespace

int64_t RunConfig::num_microbatches() const {
  const int64_t per_step = train.micro_batch_size * train.data_parallel_size.value_or(1);
  return per_step > 0 ? train.global_batch_size.value_or(per_step) / per_step : 1;
}

Resolution resolve_run_config(const Settings& settings) {
  Resolution resolution;
  RunConfig& config = resolution.config;
  IssueList& issues = resolution.issues;
  config.model = settings.model;
  config.train = settings.train;
  config.cuda_graph = migrate_cuda_graph_inputs(settings.cuda_graph, issues);
  derive_model(config.model, issues);
  derive_train(config.train);
  if (config.model.is_moe()) {
    if (auto pattern = parse_moe_layer_pattern(config.model.moe_layer_freq, config.model.num_layers)) {
      config.moe_layers = std::move(*pattern);
    }
  }
  resolve_hybrid_layers(config, issues);
  if (config.moe_layers.empty())
    config.moe_layers.assign(static_cast<std::size_t>(std::max<int64_t>(0, config.model.num_layers)), false);
  if (!issues.has_errors()) normalize_cuda_graph(config.cuda_graph, issues);
  note_rng_tracker(settings.cuda_graph, issues);
  validate_run_config(config, issues);
  return resolution;
}

RunConfig resolve_run_config_or_throw(const Settings& settings, IssueList* issues) {
  Resolution resolution = resolve_run_config(settings);
  if (issues != nullptr) *issues = resolution.issues;
  resolution.issues.throw_errors("invalid configuration");
  return resolution.config;
}

nlohmann::json run_config_to_json(const RunConfig& config) {
  Settings view;
  view.model = config.model;
  view.train = config.train;
  const nlohmann::json all = settings_to_json(view);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& spec : setting_specs()) {
    if (spec.section != "cuda_graph") out[spec.key] = all[spec.key];
  }
  const CudaGraphConfig& graph = config.cuda_graph;
  std::vector<std::string> modules;
  for (const auto module : graph.modules) modules.push_back(to_string(module));
  out["cuda_graph_impl"] = to_string(graph.impl);
  out["cuda_graph_modules"] = modules;
  out["inference_cuda_graph_scope"] = to_string(graph.inference_scope);
  out["cuda_graph_warmup_steps"] = graph.warmup_steps;
  out["cuda_graph_use_single_mempool"] = graph.use_single_mempool;
  out["cuda_graph_retain_backward_graph"] = graph.retain_backward_graph;
  out["optimizer_cuda_graph"] = graph.optimizer_cuda_graph;
  out["cuda_graph_stage_units"] = graph.stage_units;
  out["check_for_nan_in_loss_and_grad"] = graph.check_for_nan_in_loss_and_grad;
  out["inference_dynamic_batching_num_cuda_graphs"] = graph.inference_num_cuda_graphs;
  out["num_microbatches"] = config.num_microbatches();
  std::vector<int> pattern;
  for (const bool moe : config.moe_layers) pattern.push_back(moe ? 1 : 0);
  out["moe_layers"] = pattern;
  return out;
}

}  // namespace graphed::config
