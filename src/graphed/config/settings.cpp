// config/settings.cpp — the settings table and the value checks shared by every input path.
#include "graphed/config/settings.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <type_traits>

#include "graphed/util/error.h"
#include "graphed/util/text.h"

namespace graphed::config {
namespace {

using nlohmann::json;

template <typename T>
struct is_optional : std::false_type {};
template <typename T>
struct is_optional<std::optional<T>> : std::true_type {};
template <typename T>
struct unwrap {
  using type = T;
};
template <typename T>
struct unwrap<std::optional<T>> {
  using type = T;
};

template <typename T>
SettingKind kind_of(bool has_choices) {
  if constexpr (std::is_same_v<T, bool>) return SettingKind::kBool;
  if constexpr (std::is_same_v<T, int64_t>) return SettingKind::kInt;
  if constexpr (std::is_same_v<T, double>) return SettingKind::kFloat;
  if constexpr (std::is_same_v<T, std::string>) return has_choices ? SettingKind::kChoice : SettingKind::kString;
  if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return has_choices ? SettingKind::kChoiceList : SettingKind::kList;
  return SettingKind::kString;
}

/// An enum setting: its value is the choice at the enum's ordinal (names in enum order).
template <typename Enum>
SettingSpec bind_enum(Enum ModelConfig::*member, std::string key, std::string help,
                      const std::vector<std::string>& names) {
  SettingSpec spec;
  spec.key = std::move(key);
  spec.section = "model";
  spec.help = std::move(help);
  spec.kind = SettingKind::kChoice;
  spec.choices = names;
  spec.assign = [member, names](Settings& settings, const json& value) {
    const auto found = std::find(names.begin(), names.end(), value.get<std::string>());
    settings.model.*member = static_cast<Enum>(found - names.begin());  // the value was checked against names
  };
  spec.read = [member, names](const Settings& settings) {
    return json(names.at(static_cast<std::size_t>(settings.model.*member)));
  };
  return spec;
}

template <typename T>
void assign_value(T& target, const json& value) {
  target = value.get<T>();
}
template <typename T>
void assign_value(std::optional<T>& target, const json& value) {
  if (value.is_null())
    target.reset();
  else
    target = value.get<T>();
}
template <typename T>
json read_value(const T& value) {
  return json(value);
}
template <typename T>
json read_value(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

/// Binds a key to a member of one section of Settings; the kind follows the member's type.
template <typename Section, typename Field>
SettingSpec bind_setting(Section Settings::*section, const char* section_name, Field Section::*member, std::string key,
                         std::string help, std::vector<std::string> choices = {}) {
  SettingSpec spec;
  spec.key = std::move(key);
  spec.section = section_name;
  spec.help = std::move(help);
  spec.kind = kind_of<typename unwrap<Field>::type>(!choices.empty());
  spec.choices = std::move(choices);
  spec.optional = is_optional<Field>::value;
  spec.assign = [section, member](Settings& settings, const json& value) {
    assign_value(settings.*section.*member, value);
  };
  spec.read = [section, member](const Settings& settings) { return read_value(settings.*section.*member); };
  return spec;
}

template <typename Field>
SettingSpec model(Field ModelConfig::*member, std::string key, std::string help,
                  std::vector<std::string> choices = {}) {
  return bind_setting(&Settings::model, "model", member, std::move(key), std::move(help), std::move(choices));
}
template <typename Field>
SettingSpec train(Field TrainConfig::*member, std::string key, std::string help,
                  std::vector<std::string> choices = {}) {
  return bind_setting(&Settings::train, "train", member, std::move(key), std::move(help), std::move(choices));
}
template <typename Field>
SettingSpec graph(Field CudaGraphInputs::*member, std::string key, std::string help,
                  std::vector<std::string> choices = {}) {
  return bind_setting(&Settings::cuda_graph, "cuda_graph", member, std::move(key), std::move(help), std::move(choices));
}
/// Megatron's moe_layer_freq is an int or a list: 2 -> "2", [1, 0, 1, 0] -> "1,0,1,0"; others unchanged.
SettingSpec integer_or_list_as_text(SettingSpec spec) {
  spec.convert = [](const json& value) {
    if (value.is_number_integer()) return json(std::to_string(value.get<int64_t>()));
    if (!value.is_array()) return value;
    std::vector<std::string> items;
    for (const auto& item : value) {
      if (!item.is_number_integer()) return value;
      items.push_back(std::to_string(item.get<int64_t>()));
    }
    return json(join(items, ","));
  };
  return spec;
}

SettingSpec deprecated(SettingSpec spec) {
  spec.deprecated = true;
  return spec;
}

/// The MoE layers' settings.
std::vector<SettingSpec> moe_specs() {
  using M = ModelConfig;
  return {
      model(&M::num_experts, "num_experts", "experts per MoE layer; unset = dense model"),
      model(&M::moe_router_topk, "moe_router_topk", "experts each token is routed to"),
      model(&M::moe_ffn_hidden_size, "moe_ffn_hidden_size", "expert MLP width; unset = --ffn-hidden-size"),
      model(&M::moe_shared_expert_intermediate_size, "moe_shared_expert_intermediate_size",
            "shared expert width; unset = no shared expert"),
      model(&M::moe_shared_expert_gate, "moe_shared_expert_gate",
            "scale the shared expert's output by a learned per-token sigmoid gate (Qwen2-MoE)"),
      model(&M::moe_router_pre_softmax, "moe_router_pre_softmax",
            "softmax over every expert before top-k, the chosen probabilities not renormalised (default: top-k, "
            "then softmax over the chosen)"),
      model(&M::moe_aux_loss_coeff, "moe_aux_loss_coeff", "load-balancing auxiliary loss coefficient"),
      model(&M::moe_expert_capacity_factor, "moe_expert_capacity_factor",
            "expert capacity as a multiple of the even share; unset = dropless"),
      model(&M::moe_pad_expert_input_to_capacity, "moe_pad_expert_input_to_capacity",
            "pad every expert's input to its capacity (static shapes)"),
      model(&M::moe_grouped_gemm, "moe_grouped_gemm",
            "dropless experts in one grouped GEMM that finds each expert's tokens on the device (static shapes: "
            "full_iteration and whole-layer graphs work)"),
      model(&M::moe_expert_rank_capacity_factor, "moe_expert_rank_capacity_factor",
            "with --expert-model-parallel-size: each rank sends each rank a fixed block of this many times the even "
            "share of rows (static shapes); an iteration that overflows a block runs again dropless; unset = the "
            "counts are read on the host"),
      model(&M::moe_paged_stash, "moe_paged_stash",
            "with --moe-expert-rank-capacity-factor under expert parallelism: the experts keep the rows their backward "
            "needs in a pool of pages (Megatron's paged stash), only the rows that carry assignments; an iteration "
            "that finds the pool full runs again dropless"),
      model(&M::moe_paged_stash_page_size, "moe_paged_stash_page_size", "rows a page of the paged stash holds"),
      model(&M::moe_paged_stash_buffer_size_factor_cuda, "moe_paged_stash_buffer_size_factor_cuda",
            "the paged stash's size: > 0, this many times the most rows alive at once on a balanced load; < 0, "
            "-factor times the most real rows alive at once in the first iteration"),
      model(&M::moe_token_dispatcher_type, "moe_token_dispatcher_type", "token dispatcher", {"allgather", "alltoall"}),
      integer_or_list_as_text(
          model(&M::moe_layer_freq, "moe_layer_freq", "every N-th layer is MoE, or a 0/1 list per layer")),
  };
}

/// The Mamba-hybrid layers' and activation recomputation's settings.
std::vector<SettingSpec> hybrid_and_recompute_specs() {
  using M = ModelConfig;
  return {
      model(&M::is_hybrid_model, "is_hybrid_model",
            "Mamba-hybrid model: layers from --hybrid-override-pattern or the ratios"),
      model(&M::hybrid_override_pattern, "hybrid_override_pattern",
            "hybrid layers, one symbol each: M Mamba, * attention, - MLP, E MoE (e.g. M*M-M*ME)"),
      model(&M::hybrid_attention_ratio, "hybrid_attention_ratio", "share of attention layers without a pattern"),
      model(&M::hybrid_mlp_ratio, "hybrid_mlp_ratio", "share of MLP layers without a pattern"),
      model(&M::mamba_state_dim, "mamba_state_dim", "Mamba SSM state size"),
      model(&M::mamba_head_dim, "mamba_head_dim", "channels per Mamba head"),
      model(&M::mamba_num_groups, "mamba_num_groups", "Mamba groups sharing B and C"),
      model(&M::mamba_num_heads, "mamba_num_heads", "Mamba heads; unset = 2 x hidden / head dim"),
      model(&M::mamba_conv_width, "mamba_conv_width", "taps of the Mamba causal convolution"),
      model(&M::mamba_chunk_size, "mamba_chunk_size", "positions per chunk of the Mamba scan"),
      model(&M::recompute_granularity, "recompute_granularity", "activation recomputation", {"full", "selective"}),
      model(&M::recompute_method, "recompute_method", "full recomputation method", {"uniform", "block"}),
      model(&M::recompute_num_layers, "recompute_num_layers", "layers per full-recomputation unit"),
      model(&M::recompute_modules, "recompute_modules", "modules recomputed by selective recomputation",
            {"core_attn", "mlp", "moe", "moe_act", "layernorm", "shared_experts"}),
  };
}

/// The model's settings.
std::vector<SettingSpec> model_specs() {
  using M = ModelConfig;
  std::vector<SettingSpec> specs = {
      model(&M::num_layers, "num_layers", "transformer layers"),
      model(&M::hidden_size, "hidden_size", "hidden size (model width)"),
      model(&M::num_attention_heads, "num_attention_heads", "attention heads"),
      model(&M::group_query_attention, "group_query_attention", "grouped-query attention (with --num-query-groups)"),
      model(&M::num_query_groups, "num_query_groups", "key/value head groups for GQA; unset = one per head"),
      model(&M::kv_channels, "kv_channels", "size of an attention head; unset = hidden / heads"),
      model(&M::ffn_hidden_size, "ffn_hidden_size", "MLP width; unset = 4 x hidden (SwiGLU: 8/3 x hidden, to 64)"),
      model(&M::seq_length, "seq_length", "tokens per sample"),
      model(&M::max_position_embeddings, "max_position_embeddings", "learned positions; unset = seq length"),
      model(&M::vocab_size, "vocab_size", "vocabulary size (byte-level data needs >= 256)"),
      bind_enum(&M::normalization, "normalization", "normalization layer", normalization_names()),
      model(&M::norm_epsilon, "norm_epsilon", "epsilon of the normalization layers"),
      model(&M::qk_layernorm, "qk_layernorm", "normalize queries and keys per head before RoPE (Qwen3)"),
      model(&M::qk_layernorm_across_heads, "qk_layernorm_across_heads",
            "with --qk-layernorm: one norm over all heads' queries and one over all keys (OLMoE), not one per head"),
      model(&M::swiglu, "swiglu", "SwiGLU MLP instead of GELU"),
      model(&M::openai_gelu, "openai_gelu", "tanh-approximate GELU (GPT-2's gelu_new) instead of the exact one"),
      bind_enum(&M::position_embedding_type, "position_embedding_type", "position embedding",
                position_embedding_names()),
      model(&M::rotary_base, "rotary_base", "RoPE base"),
      model(&M::use_rope_scaling, "use_rope_scaling", "Llama 3.1 RoPE frequency scaling (HF rope_type llama3)"),
      model(&M::rope_scaling_factor, "rope_scaling_factor", "RoPE scaling factor (with --use-rope-scaling)"),
      model(&M::add_bias_linear, "add_bias_linear", "biases in linear layers (--disable-bias-linear turns off)"),
      model(&M::add_qkv_bias, "add_qkv_bias", "bias on the QKV projection even without --add-bias-linear (Qwen2)"),
      model(&M::untie_embeddings_and_output_weights, "untie_embeddings_and_output_weights",
            "separate output layer instead of the tied input embedding"),
      model(&M::attention_dropout, "attention_dropout", "dropout on attention probabilities, in [0, 1)"),
      model(&M::hidden_dropout, "hidden_dropout", "dropout on hidden states, in [0, 1)"),
      model(&M::init_method_std, "init_method_std", "standard deviation of weight initialization"),
      model(&M::bf16, "bf16", "bf16 autocast on the GPU"),
      model(&M::fused_kernels, "fused_kernels",
            "with --bf16 on a GPU: graphed's fused CUDA kernels and bf16 working weights (--no-fused-kernels: "
            "LibTorch's ops under autocast)"),
  };
  for (const auto& part : {moe_specs(), hybrid_and_recompute_specs()})
    specs.insert(specs.end(), part.begin(), part.end());
  return specs;
}

/// The model's FP8 settings (Megatron's fp8 arguments; config/fp8_rules.h).
std::vector<SettingSpec> fp8_specs() {
  using M = ModelConfig;
  return {
      model(&M::fp8_format, "fp8_format",
            "FP8 GEMMs in the transformer layers (H100/H200): e4m3 everywhere, or hybrid (E5M2 gradients); "
            "unset = bf16",
            {"e4m3", "hybrid"}),
      model(&M::fp8_recipe, "fp8_recipe",
            "FP8 scaling: delayed (scales from the amax history) or tensorwise (each tensor's own amax)",
            {"delayed", "tensorwise"}),
      model(&M::fp8_margin, "fp8_margin", "FP8 scales leave 2^margin of headroom"),
      model(&M::fp8_amax_history_len, "fp8_amax_history_len", "steps of amax history (delayed scaling)"),
      model(&M::fp8_amax_compute_algo, "fp8_amax_compute_algo", "amax of the history a delayed scale follows",
            {"most_recent", "max"}),
      model(&M::fp8_wgrad, "fp8_wgrad", "weight-gradient GEMMs in FP8 (--no-fp8-wgrad: bf16)"),
      model(&M::first_last_layers_bf16, "first_last_layers_bf16",
            "keep the first and last layers in bf16 (tensorwise recipe)"),
      model(&M::num_layers_at_start_in_bf16, "num_layers_at_start_in_bf16",
            "leading layers in bf16 with --first-last-layers-bf16"),
      model(&M::num_layers_at_end_in_bf16, "num_layers_at_end_in_bf16",
            "trailing layers in bf16 with --first-last-layers-bf16"),
  };
}

/// The training run's settings.
std::vector<SettingSpec> train_specs() {
  using T = TrainConfig;
  return {
      train(&T::micro_batch_size, "micro_batch_size", "samples per microbatch"),
      train(&T::global_batch_size, "global_batch_size", "samples per iteration; unset = one microbatch per rank"),
      train(&T::train_iters, "train_iters", "training iterations"),
      train(&T::lr, "lr", "peak learning rate"),
      train(&T::min_lr, "min_lr", "learning rate at the end of the decay"),
      train(&T::lr_warmup_iters, "lr_warmup_iters", "iterations of linear warmup"),
      train(&T::lr_decay_style, "lr_decay_style", "learning-rate decay", {"constant", "linear", "cosine"}),
      train(&T::lr_decay_iters, "lr_decay_iters", "iterations of decay; unset = --train-iters"),
      train(&T::weight_decay, "weight_decay", "AdamW weight decay"),
      train(&T::adam_beta1, "adam_beta1", "AdamW beta1"),
      train(&T::adam_beta2, "adam_beta2", "AdamW beta2"),
      train(&T::adam_eps, "adam_eps", "AdamW epsilon"),
      train(&T::clip_grad, "clip_grad", "global gradient-norm clip; 0 = off"),
      train(&T::seed, "seed", "random seed (data order, initialization, dropout)"),
      train(&T::log_interval, "log_interval", "iterations between progress lines"),
      train(&T::eval_interval, "eval_interval", "iterations between evaluations"),
      train(&T::eval_iters, "eval_iters", "validation batches per evaluation"),
      train(&T::data_path, "data_path", "token file (.bin), text file or folder of .txt; unset = default corpus"),
      train(&T::token_dtype, "token_dtype", "width of the ids in a .bin token file", {"uint16", "uint32"}),
      train(&T::mock_data, "mock_data", "synthetic tokens instead of data (benchmarks)"),
      train(&T::split, "split", "train,validation,test weights"),
      train(&T::save, "save", "checkpoint folder to write"),
      train(&T::load, "load", "checkpoint folder to resume from"),
      train(&T::save_interval, "save_interval", "iterations between checkpoints (needs --save)"),
      train(&T::metrics_file, "metrics_file", "JSON-lines file of per-interval metrics (missing folders are made)"),
      train(&T::exit_signal_handler, "exit_signal_handler",
            "on SIGINT or SIGTERM, finish the iteration, save (with --save) and exit 0; a second signal exits at "
            "once; unset = on when --save is given"),
      train(&T::device, "device", "where to train; auto = CUDA if this build and machine have it",
            {"auto", "cuda", "cpu"}),
      train(&T::sample_prompt, "sample_prompt", "text the samples continue (byte-level data only)"),
      train(&T::sample_tokens, "sample_tokens", "tokens per sample, at each evaluation and at the end; 0 = none"),
      train(&T::sample_temperature, "sample_temperature", "sampling temperature; 0 = greedy"),
      train(&T::sample_top_k, "sample_top_k", "sample among the k likeliest tokens; 0 = all"),
      train(&T::tensor_model_parallel_size, "tensor_model_parallel_size",
            "tensor-parallel ranks (Megatron's layout: heads, ffn and vocabulary split)"),
      train(&T::sequence_parallel, "sequence_parallel",
            "with tensor parallelism: norms, dropout and residuals on sequence shards (reduce-scatter and all-gather)"),
      train(&T::pipeline_model_parallel_size, "pipeline_model_parallel_size", "pipeline stages (launch with torchrun)"),
      train(&T::num_layers_per_virtual_pipeline_stage, "num_layers_per_virtual_pipeline_stage",
            "layers per virtual stage: the interleaved pipeline schedule; unset = 1F1B"),
      train(&T::data_parallel_size, "data_parallel_size",
            "data-parallel ranks; unset = world size / (tensor x pipeline size), which it must equal"),
      train(&T::expert_model_parallel_size, "expert_model_parallel_size",
            "expert-parallel ranks: each MoE layer's experts shared out over this many data-parallel ranks, tokens "
            "exchanged all-to-all (--moe-token-dispatcher-type alltoall)"),
      train(&T::expert_tensor_parallel_size, "expert_tensor_parallel_size",
            "tensor ranks each expert's ffn is split over: the tensor size (unset) or 1 (every expert whole on its "
            "expert rank; needs --sequence-parallel with tensor parallelism)"),
      train(&T::use_distributed_optimizer, "use_distributed_optimizer",
            "Megatron's ZeRO-1: each data-parallel rank steps and keeps the optimizer state of its shard"),
      train(&T::overlap_grad_reduce, "overlap_grad_reduce",
            "graphed overlaps where it can anyway; with --use-distributed-optimizer: Megatron's buckets, not one"),
      train(&T::overlap_param_gather, "overlap_param_gather",
            "gather the new weights during the next forward, each linear waiting for its bucket (rules PL-22..24)"),
      train(&T::grad_reduce_in_bf16, "grad_reduce_in_bf16",
            "sum the data-parallel gradients in bf16 (half the bytes); accumulated in fp32 all the same"),
      train(&T::distributed_timeout_minutes, "distributed_timeout_minutes",
            "how long a rank waits for the others (rendezvous, collectives) before it fails"),
  };
}

/// The CUDA-graph settings, the deprecated spellings last.
std::vector<SettingSpec> cuda_graph_specs() {
  using G = CudaGraphInputs;
  return {
      graph(&G::impl, "cuda_graph_impl", "CUDA-graph implementation", cuda_graph_impl_names()),
      graph(&G::modules, "cuda_graph_modules", "per-layer capture regions; unset = whole layer",
            cuda_graph_module_input_names()),
      graph(&G::inference_scope, "inference_cuda_graph_scope", "inference graph scope; unset = layer for local",
            inference_cuda_graph_scope_names()),
      graph(&G::warmup_steps, "cuda_graph_warmup_steps", "eager iterations before capture, >= 1"),
      graph(&G::use_single_mempool, "cuda_graph_use_single_mempool",
            "an impl's graphs share one pool (training, evaluation and optimizer-step graphs)"),
      graph(&G::retain_backward_graph, "cuda_graph_retain_backward_graph", "capture backward with retain_graph"),
      graph(
          &G::optimizer_cuda_graph, "optimizer_cuda_graph",
          "graph the optimizer step (full_iteration: inside its graph; local, transformer_engine: a graph of its own)"),
      graph(&G::stage_units, "cuda_graph_stage_units",
            "local and transformer_engine also graph the embedding, the loss and the optimizer step"),
      graph(&G::te_rng_tracker, "te_rng_tracker", "accepted for Megatron scripts; graphs are always graph-safe (VA-9)"),
      graph(&G::check_for_nan_in_loss_and_grad, "check_for_nan_in_loss_and_grad",
            "device-side NaN check of loss and gradients, read at log intervals"),
      graph(&G::inference_num_cuda_graphs, "inference_dynamic_batching_num_cuda_graphs",
            "decode batch-size buckets of the local impl; -1 = auto"),
      deprecated(
          graph(&G::scope, "cuda_graph_scope", "deprecated: --cuda-graph-modules", cuda_graph_module_input_names())),
      deprecated(graph(&G::enable_cuda_graph, "enable_cuda_graph", "deprecated: --cuda-graph-impl local")),
      deprecated(
          graph(&G::external_cuda_graph, "external_cuda_graph", "deprecated: --cuda-graph-impl transformer_engine")),
  };
}

std::vector<SettingSpec> make_specs() {
  std::vector<SettingSpec> specs = model_specs();
  for (const auto& part : {fp8_specs(), train_specs(), cuda_graph_specs()}) {
    specs.insert(specs.end(), part.begin(), part.end());
  }
  return specs;
}

std::string dashes(std::string text) {
  std::replace(text.begin(), text.end(), '_', '-');
  return text;
}

std::string quoted(const json& value) { return value.dump(); }

[[noreturn]] void fail(const std::string& message) { throw ConfigError(message, {message}); }

bool is_numeric(const SettingSpec& spec) { return spec.kind == SettingKind::kInt || spec.kind == SettingKind::kFloat; }

/// An example value of the setting: its default where that is a number, else 1.
std::string example_of(const SettingSpec& spec) {
  const json fallback = spec.read(Settings{});
  return fallback.is_number() ? setting_value_text(fallback) : "1";
}

/// The fix of a flag's value of the wrong kind: the kind, an example, and how to unset an optional number.
std::string token_fix(const SettingSpec& spec, const std::string& label) {
  const std::string unset = spec.optional ? ", or none to unset it" : "";
  if (spec.kind == SettingKind::kInt)
    return "; fix: give a whole number, such as " + label + " " + example_of(spec) + unset;
  if (spec.kind == SettingKind::kFloat)
    return "; fix: give a number, such as " + label + " " + example_of(spec) + unset;
  return "; fix: give true or false, or leave the value out (" + spec.flag() + " turns it on, --no-" +
         spec.flag().substr(2) + " off)";
}

/// The fix of a JSON value of the wrong type: what to write, with an example.
std::string json_fix(const SettingSpec& spec) {
  const std::string unset = spec.optional ? ", or null to unset it" : "";
  const std::string key = "\"" + spec.key + "\": ";
  switch (spec.kind) {
    case SettingKind::kInt:
      return "; fix: write a JSON integer without quotes, such as " + key + example_of(spec) + unset;
    case SettingKind::kFloat:
      return "; fix: write a JSON number without quotes, such as " + key + example_of(spec) + unset;
    case SettingKind::kBool: return "; fix: write true or false without quotes, such as " + key + "true";
    case SettingKind::kString: return "; fix: write a quoted JSON string" + unset;
    case SettingKind::kChoice: return "; fix: write one of " + join(spec.choices, ", ") + " as a JSON string" + unset;
    case SettingKind::kList:
    case SettingKind::kChoiceList: {
      const std::string first = spec.choices.empty() ? "a" : spec.choices[0];
      const std::string second = spec.choices.size() < 2 ? "b" : spec.choices[1];
      return "; fix: write a list of strings, such as " + key + "[\"" + first + "\", \"" + second +
             "\"], or one comma-separated string";
    }
  }
  return "";
}

json parse_scalar_token(const SettingSpec& spec, const std::string& token, const std::string& label) {
  std::string lower = token;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (spec.optional && is_numeric(spec) && (lower == "none" || lower == "null")) return json(nullptr);
  switch (spec.kind) {
    case SettingKind::kInt: {
      errno = 0;
      char* end = nullptr;
      const long long value = std::strtoll(token.c_str(), &end, 10);
      if (token.empty() || *end != '\0' || errno == ERANGE) {
        fail(label + " expects an integer, got '" + token + "'" + token_fix(spec, label));
      }
      return json(static_cast<int64_t>(value));
    }
    case SettingKind::kFloat: {
      errno = 0;
      char* end = nullptr;
      const double value = std::strtod(token.c_str(), &end);
      if (token.empty() || *end != '\0' || errno == ERANGE) {
        fail(label + " expects a number, got '" + token + "'" + token_fix(spec, label));
      }
      return json(value);
    }
    case SettingKind::kBool: {
      if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") return json(true);
      if (lower == "false" || lower == "0" || lower == "no" || lower == "off") return json(false);
      fail(label + " expects true or false, got '" + token + "'" + token_fix(spec, label));
    }
    default: return json(token);
  }
}

void check_choice(const SettingSpec& spec, const std::string& value, const std::string& label) {
  if (std::find(spec.choices.begin(), spec.choices.end(), value) != spec.choices.end()) return;
  std::string message = "unknown value '" + value + "' for " + label;
  if (const auto near = nearest_match(value, spec.choices)) message += " (did you mean " + *near + "?)";
  fail(message + "; fix: use one of " + join(spec.choices, ", "));
}

}  // namespace

std::string SettingSpec::flag() const { return "--" + dashes(key); }
std::string SettingSpec::underscore_flag() const { return "--" + key; }

const std::vector<SettingSpec>& setting_specs() {
  static const std::vector<SettingSpec> specs = make_specs();
  return specs;
}

const std::vector<SettingAlias>& setting_aliases() {
  static const std::vector<SettingAlias> aliases{
      {"--disable-bias-linear", "add_bias_linear", false, "no biases in linear layers"},
  };
  return aliases;
}

const SettingSpec* find_setting(const std::string& name) {
  std::string key = name;
  while (!key.empty() && key.front() == '-') key.erase(key.begin());
  std::replace(key.begin(), key.end(), '-', '_');
  for (const auto& spec : setting_specs()) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

std::vector<std::string> setting_keys() {
  std::vector<std::string> keys;
  for (const auto& spec : setting_specs()) keys.push_back(spec.key);
  return keys;
}

json parse_setting_tokens(const SettingSpec& spec, const std::vector<std::string>& tokens, const std::string& label) {
  const bool is_list = spec.kind == SettingKind::kList || spec.kind == SettingKind::kChoiceList;
  if (is_list) {
    std::vector<std::string> values;
    for (const auto& token : tokens) {
      for (auto& piece : split(token, ',')) values.push_back(std::move(piece));
    }
    return check_setting_value(spec, json(values), label);
  }
  if (tokens.size() != 1) {
    fail(label + " expects one value, got " + std::to_string(tokens.size()) + "; fix: give " + label +
         " once, with one value");
  }
  return check_setting_value(spec, parse_scalar_token(spec, tokens.front(), label), label);
}

json check_setting_value(const SettingSpec& spec, const json& given, const std::string& label) {
  const json value = spec.convert && !given.is_null() ? spec.convert(given) : given;
  if (value.is_null()) {
    if (spec.optional) return value;
    fail(label + " cannot be null (it has no unset state); fix: give a value or leave the key out");
  }
  const auto wrong = [&](const std::string& expected) {
    fail(label + " expects " + expected + ", got " + quoted(value) + json_fix(spec));
  };
  switch (spec.kind) {
    case SettingKind::kInt:
      if (!value.is_number_integer()) wrong("an integer");
      return value;
    case SettingKind::kFloat:
      if (!value.is_number()) wrong("a number");
      return json(value.get<double>());
    case SettingKind::kBool:
      if (!value.is_boolean()) wrong("true or false");
      return value;
    case SettingKind::kString:
      if (!value.is_string()) wrong("a string");
      return value;
    case SettingKind::kChoice:
      if (!value.is_string()) wrong("one of " + join(spec.choices, ", "));
      check_choice(spec, value.get<std::string>(), label);
      return value;
    case SettingKind::kList:
    case SettingKind::kChoiceList: {
      std::vector<std::string> items;
      if (value.is_string()) {
        items = split(value.get<std::string>(), ',');
      } else if (value.is_array()) {
        for (const auto& item : value) {
          if (!item.is_string()) wrong("a list of strings");
          for (auto& piece : split(item.get<std::string>(), ',')) items.push_back(std::move(piece));
        }
      } else {
        wrong("a list of strings");
      }
      if (spec.kind == SettingKind::kChoiceList) {
        for (const auto& item : items) check_choice(spec, item, label);
      }
      return json(items);
    }
  }
  return value;
}

void apply_settings(Settings& settings, const json& object, const std::string& source, SettingOrigins* origins) {
  if (!object.is_object()) {
    fail(source + " must be a JSON object of settings, got " + quoted(object) +
         "; fix: write a JSON object of settings, such as {\"num_layers\": 4}");
  }
  std::vector<std::string> problems;
  std::vector<std::pair<const SettingSpec*, json>> checked;
  for (const auto& [name, value] : object.items()) {
    const SettingSpec* spec = find_setting(name);
    if (spec == nullptr) {
      std::string message = "unknown setting '" + name + "' in " + source;
      if (const auto near = nearest_match(name, setting_keys())) message += " (did you mean " + *near + "?)";
      problems.push_back(message + "; fix: see `graphed check-config --help` for the valid settings");
      continue;
    }
    try {
      checked.emplace_back(spec, check_setting_value(*spec, value, spec->key + " in " + source));
    } catch (const ConfigError& error) {
      problems.push_back(error.what());
    }
  }
  if (!problems.empty()) {
    throw ConfigError(
        problems.size() == 1 ? problems.front() : std::to_string(problems.size()) + " problems in " + source, problems);
  }
  for (const auto& [spec, value] : checked) {
    spec->assign(settings, value);
    if (origins != nullptr) (*origins)[spec->key] = source;
  }
}

std::string setting_value_text(const json& value, const std::string& separator, const std::string& empty_list) {
  if (value.is_null()) return "unset";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return format_number(value.get<double>());
  if (!value.is_array()) return value.dump();
  if (value.empty()) return empty_list;
  std::vector<std::string> items;
  for (const auto& item : value) items.push_back(setting_value_text(item, separator, empty_list));
  return join(items, separator);
}

json settings_to_json(const Settings& settings) {
  json object = json::object();
  for (const auto& spec : setting_specs()) object[spec.key] = spec.read(settings);
  return object;
}

}  // namespace graphed::config
