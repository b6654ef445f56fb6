// hf/hf_config.cpp — see hf/hf_config.h. Defaults and field meanings follow transformers 5's
// configuration_{llama,qwen2,qwen3,gpt2,mixtral,qwen2_moe,qwen3_moe}.py and modeling_rope_utils.py
// (standardize_rope_params, _compute_llama3_parameters), which still read transformers 4's spellings.
#include "graphed/hf/hf_config.h"

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/text.h"

namespace graphed::hf {
namespace {

using nlohmann::json;

const char* const kSupportedArchitectures =
    "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel, MixtralForCausalLM, "
    "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, OlmoeForCausalLM";
const char* const kResaveFix = "save the model again with save_pretrained, or correct the field";

/// A JSON value for a message: compact, cut to 60 characters.
std::string shown(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

/// Reads a JSON file; nullopt when it does not exist. Throws DataError when it cannot be read or parsed.
std::optional<json> read_json_file(const std::string& path) {
  if (!path_exists(path)) return std::nullopt;
  std::string text;
  if (const int error = read_file(path, text)) {
    throw DataError("cannot read '" + path + "': " + std::strerror(error) + "; fix: check that the model folder " +
                    "is complete and readable");
  }
  try {
    return json::parse(text);
  } catch (const json::parse_error& error) {
    throw DataError("'" + path + "' is not JSON (syntax error at byte " + std::to_string(error.byte) +
                    "); fix: download the model folder again or write it with save_pretrained");
  } catch (const json::exception& error) {  // a number beyond a double (1e999)
    throw DataError("'" + path + "' is not JSON (" + without_library_tag(error.what()) +
                    "); fix: download the model folder again or write it with save_pretrained");
  }
}

/// The fields of one JSON object of a file, read with their types checked and every problem worded
/// with the file, the field and its value.
class Fields {
 public:
  Fields(std::string path, const json& object, std::string owner)
      : path_(std::move(path)), object_(object), owner_(std::move(owner)) {}

  /// Present and not null.
  bool has(const std::string& key) const { return object_.contains(key) && !object_.at(key).is_null(); }
  /// Present, possibly null.
  bool contains(const std::string& key) const { return object_.contains(key); }
  const json& at(const std::string& key) const { return object_.at(key); }

  /// A required integer >= 1.
  int64_t size(const std::string& key) const {
    if (!has(key)) {
      throw DataError("'" + path_ + "' has no field '" + prefix_ + key + "', which " + owner_ +
                      " needs; fix: " + kResaveFix);
    }
    return checked_size(key);
  }
  /// An integer >= 1, or fallback when missing or null.
  int64_t size(const std::string& key, int64_t fallback) const { return has(key) ? checked_size(key) : fallback; }
  /// A number, or fallback when missing or null.
  double number(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    if (!at(key).is_number()) invalid(key, "a number");
    return at(key).get<double>();
  }
  /// A required number.
  double number(const std::string& key) const {
    if (!has(key)) {
      throw DataError("'" + path_ + "' has no field '" + prefix_ + key + "', which " + owner_ +
                      " needs; fix: " + kResaveFix);
    }
    return number(key, 0.0);
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!at(key).is_boolean()) invalid(key, "true or false");
    return at(key).get<bool>();
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!at(key).is_string()) invalid(key, "a string");
    return at(key).get<std::string>();
  }

  /// Throws: the field holds a value of the wrong type or range.
  [[noreturn]] void invalid(const std::string& key, const std::string& expected) const {
    throw DataError("'" + path_ + "' field '" + prefix_ + key + "' is " + shown(at(key)) + ", expected " + expected +
                    "; fix: " + kResaveFix);
  }
  /// Throws: the field's value is valid for transformers but not something graphed runs.
  [[noreturn]] void unsupported(const std::string& key, const json& value, const std::string& supported) const {
    throw DataError("unsupported model in '" + path_ + "': " + prefix_ + key + " is " + shown(value) +
                    ", but graphed supports only " + supported + " for " + owner_ +
                    "; fix: pick a model with a supported " + prefix_ + key + " (see docs/hf-models.md)");
  }
  /// Throws: sizes that do not fit together.
  [[noreturn]] void inconsistent(const std::string& what) const {
    throw DataError("'" + path_ + "' describes no valid " + owner_ + ": " + what + "; fix: " + kResaveFix);
  }

  /// The fields of a nested object (rope_parameters), named "outer.key" in messages.
  Fields nested(const std::string& key) const {
    if (!at(key).is_object()) invalid(key, "an object or null");
    Fields inner(path_, at(key), owner_);
    inner.prefix_ = prefix_ + key + ".";
    return inner;
  }

 private:
  int64_t checked_size(const std::string& key) const {
    const json& value = at(key);
    if (!value.is_number_integer() || value.get<int64_t>() < 1) invalid(key, "an integer >= 1");
    return value.get<int64_t>();
  }

  std::string path_;
  const json& object_;
  std::string owner_;
  std::string prefix_;
};

HfArchitecture parse_architecture(const Fields& fields, const std::string& path, const json& config) {
  static const std::vector<HfArchitecture> all{
      HfArchitecture::kLlama,   HfArchitecture::kQwen2,    HfArchitecture::kQwen3,    HfArchitecture::kGpt2,
      HfArchitecture::kMixtral, HfArchitecture::kQwen2Moe, HfArchitecture::kQwen3Moe, HfArchitecture::kOlmoe};
  static const std::vector<std::pair<std::string, HfArchitecture>> by_type{
      {"llama", HfArchitecture::kLlama},        {"qwen2", HfArchitecture::kQwen2},
      {"qwen3", HfArchitecture::kQwen3},        {"gpt2", HfArchitecture::kGpt2},
      {"mixtral", HfArchitecture::kMixtral},    {"qwen2_moe", HfArchitecture::kQwen2Moe},
      {"qwen3_moe", HfArchitecture::kQwen3Moe}, {"olmoe", HfArchitecture::kOlmoe}};
  if (fields.has("architectures")) {
    const json& list = config.at("architectures");
    if (!list.is_array() || list.empty() || !list[0].is_string())
      fields.invalid("architectures", "a list of class names");
    for (const HfArchitecture architecture : all) {
      if (list[0] == to_string(architecture)) return architecture;
    }
    fields.unsupported("architectures", list, kSupportedArchitectures);
  }
  if (!fields.has("model_type")) {
    throw DataError(
        "'" + path +
        "' has neither 'architectures' nor 'model_type', so the model class is unknown; fix: " + kResaveFix);
  }
  const std::string type = fields.text("model_type", "");
  for (const auto& [name, architecture] : by_type) {
    if (type == name) return architecture;
  }
  fields.unsupported("model_type", config.at("model_type"),
                     "llama, qwen2, qwen3, gpt2, mixtral, qwen2_moe, qwen3_moe, olmoe");
}

/// rope_parameters (transformers 5) or rope_scaling (4), with rope_theta inside or beside it.
void parse_rope(const Fields& fields, double default_theta, config::ModelConfig& model) {
  model.position_embedding_type = config::PositionEmbedding::kRope;
  const std::string key = fields.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  model.rotary_base = fields.number("rope_theta", default_theta);
  if (fields.has("partial_rotary_factor") && fields.number("partial_rotary_factor", 1.0) != 1.0) {
    fields.unsupported("partial_rotary_factor", fields.at("partial_rotary_factor"), "1 (rotary on the whole head)");
  }
  if (fields.has(key)) {
    const Fields rope = fields.nested(key);
    model.rotary_base = rope.number("rope_theta", model.rotary_base);
    if (rope.has("partial_rotary_factor") && rope.number("partial_rotary_factor", 1.0) != 1.0) {
      rope.unsupported("partial_rotary_factor", rope.at("partial_rotary_factor"), "1 (rotary on the whole head)");
    }
    const std::string type_key = rope.has("rope_type") || !rope.has("type") ? "rope_type" : "type";
    const std::string type = rope.text(type_key, "default");
    if (type == "llama3") {
      model.use_rope_scaling = true;
      model.rope_scaling_factor = rope.number("factor");
      model.rope_scaling_low_freq_factor = rope.number("low_freq_factor");
      model.rope_scaling_high_freq_factor = rope.number("high_freq_factor");
      model.rope_scaling_original_max_position_embeddings =
          rope.size("original_max_position_embeddings", *model.max_position_embeddings);
      if (model.rope_scaling_factor <= 0.0) rope.invalid("factor", "a number > 0");
      if (model.rope_scaling_low_freq_factor <= 0.0) rope.invalid("low_freq_factor", "a number > 0");
      if (model.rope_scaling_high_freq_factor <= model.rope_scaling_low_freq_factor) {
        rope.invalid("high_freq_factor",
                     "a number > low_freq_factor " + format_number(model.rope_scaling_low_freq_factor));
      }
    } else if (type != "default") {
      rope.unsupported(type_key, rope.at(type_key), "\"default\" and \"llama3\" (Llama 3.1)");
    }
  }
  if (model.rotary_base <= 0.0) fields.inconsistent("rope_theta " + format_number(model.rotary_base) + " is not > 0");
}

/// A Llama-family class's defaults for fields config.json may leave out.
struct ClassDefaults {
  int64_t key_value_heads = 0;  ///< 0: one per attention head
  bool head_dim_128 = false;    ///< head_dim 128 when the key is absent (Qwen3); else hidden_size / heads
  int64_t max_positions = 2048;
  double rope_theta = 10000.0;
  int64_t experts = 0;       ///< MoE classes: num_experts (num_local_experts)
  int64_t top_k = 0;         ///< num_experts_per_tok
  int64_t expert_width = 0;  ///< moe_intermediate_size; 0: the experts are intermediate_size wide (no such key)
};

ClassDefaults class_defaults(HfArchitecture architecture) {
  switch (architecture) {
    case HfArchitecture::kQwen2: return {32, false, 32768, 10000.0};
    case HfArchitecture::kQwen3: return {32, true, 32768, 10000.0};
    case HfArchitecture::kMixtral: return {8, false, 4096 * 32, 1e6, 8, 2, 0};
    case HfArchitecture::kQwen2Moe: return {16, false, 32768, 10000.0, 60, 4, 1408};
    case HfArchitecture::kQwen3Moe: return {4, false, 32768, 10000.0, 128, 8, 768};
    case HfArchitecture::kOlmoe: return {0, false, 4096, 10000.0, 64, 8, 0};
    default: return {};
  }
}

/// No sliding window: Qwen's use_sliding_window and layer_types, Mixtral's (Mistral's) sliding_window.
void require_full_attention(const Fields& fields, HfArchitecture family, const config::ModelConfig& m) {
  if (family == HfArchitecture::kLlama) {
    if (fields.has("sliding_window") && fields.size("sliding_window") < *m.max_position_embeddings) {
      fields.unsupported("sliding_window", fields.at("sliding_window"),
                         "null or >= max_position_embeddings (full attention in every layer)");
    }
    return;
  }
  if (fields.boolean("use_sliding_window", false)) {
    fields.unsupported("use_sliding_window", true, "false (full attention in every layer)");
  }
  if (fields.has("layer_types")) {
    const json& types = fields.at("layer_types");
    if (!types.is_array()) fields.invalid("layer_types", "a list of strings");
    for (const auto& type : types) {
      if (type != "full_attention")
        fields.unsupported("layer_types", types, "[\"full_attention\", ...] in every layer");
    }
  }
}

/// Llama, Qwen2, Qwen3 and their mixtures of experts: RMSNorm, RoPE, GQA, SwiGLU.
void parse_llama_family(const Fields& fields, HfConfig& hf) {
  const HfArchitecture family = attention_family(hf.architecture);
  const ClassDefaults defaults = class_defaults(hf.architecture);
  config::ModelConfig& m = hf.model;
  m.hidden_size = fields.size("hidden_size");
  m.ffn_hidden_size = fields.size("intermediate_size");
  m.num_layers = fields.size("num_hidden_layers");
  m.num_attention_heads = fields.size("num_attention_heads");
  m.vocab_size = fields.size("vocab_size");
  const int64_t heads = m.num_attention_heads;
  // A missing num_key_value_heads takes the class default; null is one per head.
  const int64_t groups = defaults.key_value_heads > 0 && !fields.contains("num_key_value_heads")
                             ? defaults.key_value_heads
                             : fields.size("num_key_value_heads", heads);
  if (heads % groups != 0) {
    fields.inconsistent("num_attention_heads " + std::to_string(heads) + " is not divisible by num_key_value_heads " +
                        std::to_string(groups));
  }
  m.group_query_attention = groups != heads;
  m.num_query_groups = groups;
  // head_dim: Qwen3's class default is 128; otherwise unset means hidden_size / num_attention_heads.
  const bool default_head_dim = !fields.has("head_dim") && !(defaults.head_dim_128 && !fields.contains("head_dim"));
  if (default_head_dim && m.hidden_size % heads != 0) {
    fields.inconsistent("hidden_size " + std::to_string(m.hidden_size) + " is not divisible by num_attention_heads " +
                        std::to_string(heads) + " and head_dim is unset");
  }
  const int64_t head_dim = default_head_dim ? m.hidden_size / heads : fields.size("head_dim", 128);
  if (head_dim % 2 != 0) fields.inconsistent("head_dim " + std::to_string(head_dim) + " is odd (RoPE rotates pairs)");
  if (head_dim * heads != m.hidden_size) m.kv_channels = head_dim;  // Qwen3-0.6B: 16 heads x 128 != 1024
  m.max_position_embeddings = fields.size("max_position_embeddings", defaults.max_positions);
  m.normalization = config::Normalization::kRmsNorm;
  const bool eps_1e5 = hf.architecture == HfArchitecture::kMixtral || hf.architecture == HfArchitecture::kOlmoe;
  m.norm_epsilon = fields.number("rms_norm_eps", eps_1e5 ? 1e-5 : 1e-6);
  if (m.norm_epsilon <= 0.0) fields.invalid("rms_norm_eps", "a number > 0");
  const std::string activation = fields.text("hidden_act", "silu");
  if (activation != "silu") fields.unsupported("hidden_act", fields.at("hidden_act"), "\"silu\" (SwiGLU)");
  m.swiglu = true;
  parse_rope(fields, defaults.rope_theta, m);
  require_full_attention(fields, family, m);
  // Biases: Qwen2 always has q/k/v biases and no other (Qwen2-MoE: qkv_bias, default true); Llama, Mixtral and
  // Qwen3 put attention_bias on q/k/v and o.
  const bool qwen2 = family == HfArchitecture::kQwen2;
  hf.qkv_bias = qwen2 ? hf.architecture == HfArchitecture::kQwen2 || fields.boolean("qkv_bias", true)
                      : fields.boolean("attention_bias", false);
  hf.attention_bias = !qwen2 && fields.boolean("attention_bias", false);
  hf.mlp_bias = hf.architecture == HfArchitecture::kLlama && fields.boolean("mlp_bias", false);
  // graphed's biases are all-or-nothing (add_bias_linear) plus the QKV-only one; the loader zero-fills
  // a graphed bias whose Hugging Face tensor does not exist, which leaves the function unchanged.
  m.add_bias_linear = hf.attention_bias || hf.mlp_bias;
  m.add_qkv_bias = hf.qkv_bias && !m.add_bias_linear;
  m.qk_layernorm = family == HfArchitecture::kQwen3 || hf.architecture == HfArchitecture::kOlmoe;
  // OLMoE's q_norm spans every head's queries and its k_norm every group's keys.
  m.qk_layernorm_across_heads = hf.architecture == HfArchitecture::kOlmoe;
  if (fields.has("clip_qkv")) fields.unsupported("clip_qkv", fields.at("clip_qkv"), "null (no clamping of q, k and v)");
  hf.tie_word_embeddings = fields.boolean("tie_word_embeddings", false);
}

/// Which layers are MoE: Qwen's mlp_only_layers and decoder_sparse_step (layer i is MoE when it is not listed
/// and (i + 1) is a multiple of the step), as --moe-layer-freq's 0/1 list; every layer for Mixtral.
std::string moe_layer_pattern(const Fields& fields, HfArchitecture architecture, int64_t layers) {
  if (architecture == HfArchitecture::kMixtral || architecture == HfArchitecture::kOlmoe) return "1";
  const int64_t step = fields.size("decoder_sparse_step", 1);
  std::vector<bool> dense(static_cast<std::size_t>(layers), false);
  if (fields.has("mlp_only_layers")) {
    const json& listed = fields.at("mlp_only_layers");
    if (!listed.is_array()) fields.invalid("mlp_only_layers", "a list of layer indices");
    for (const auto& index : listed) {
      if (!index.is_number_integer() || index.get<int64_t>() < 0 || index.get<int64_t>() >= layers) {
        fields.invalid("mlp_only_layers", "a list of layer indices from 0 to " + std::to_string(layers - 1));
      }
      dense[static_cast<std::size_t>(index.get<int64_t>())] = true;
    }
  }
  std::string pattern;
  for (int64_t i = 0; i < layers; ++i) {
    const bool moe = !dense[static_cast<std::size_t>(i)] && (i + 1) % step == 0;
    pattern += (i == 0 ? "" : ",") + std::string(moe ? "1" : "0");
  }
  return pattern;
}

/// Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE: experts, top-k, widths, routing, the shared expert and the MoE layers.
void parse_moe(const Fields& fields, HfConfig& hf) {
  const HfArchitecture architecture = hf.architecture;
  const ClassDefaults defaults = class_defaults(architecture);
  config::ModelConfig& m = hf.model;
  const bool mixtral = architecture == HfArchitecture::kMixtral;
  // Mixtral's key is num_local_experts, Qwen's and OLMoE's num_experts; transformers 5 maps each to the other.
  const std::string own = mixtral ? "num_local_experts" : "num_experts";
  const std::string alias = mixtral ? "num_experts" : "num_local_experts";
  const std::string experts_key = fields.has(own) || !fields.has(alias) ? own : alias;
  const int64_t experts = fields.size(experts_key, defaults.experts);
  if (experts < 2) fields.unsupported(experts_key, experts, "2 or more experts");
  const int64_t top_k = fields.size("num_experts_per_tok", defaults.top_k);
  if (top_k > experts) {
    fields.inconsistent("num_experts_per_tok " + std::to_string(top_k) + " exceeds " + experts_key + " " +
                        std::to_string(experts));
  }
  m.num_experts = experts;
  m.moe_router_topk = top_k;
  // Mixtral's and OLMoE's experts are intermediate_size wide, Qwen's moe_intermediate_size; Mixtral always
  // renormalises the k weights, the others only with norm_topk_prob.
  m.moe_ffn_hidden_size =
      defaults.expert_width == 0 ? *m.ffn_hidden_size : fields.size("moe_intermediate_size", defaults.expert_width);
  m.moe_router_pre_softmax = !mixtral && !fields.boolean("norm_topk_prob", false);
  if (architecture == HfArchitecture::kQwen2Moe) {
    m.moe_shared_expert_intermediate_size = fields.size("shared_expert_intermediate_size", 5632);
    m.moe_shared_expert_gate = true;
  }
  m.moe_layer_freq = moe_layer_pattern(fields, architecture, m.num_layers);
  hf.moe_layers = config::parse_moe_layer_pattern(m.moe_layer_freq, m.num_layers).value();
  // Dropless, every expert in one grouped GEMM (static shapes: the serving engine's graphs take it). The
  // load-balancing loss is training's; transformers adds it only with output_router_logits.
  m.moe_grouped_gemm = true;
  m.moe_aux_loss_coeff = 0.0;
}

/// GPT2LMHeadModel: LayerNorm, learned positions, fused Conv1D attention, GELU MLP, biases, tied output.
void parse_gpt2(const Fields& fields, HfConfig& hf) {
  config::ModelConfig& m = hf.model;
  // GPT2Config's attribute_map: n_embd = hidden_size, n_layer = num_hidden_layers, n_head =
  // num_attention_heads, n_positions = max_position_embeddings.
  const auto either = [&](const char* name, const char* alias) {
    return fields.has(name) || !fields.has(alias) ? name : alias;
  };
  m.hidden_size = fields.size(either("n_embd", "hidden_size"));
  m.num_layers = fields.size(either("n_layer", "num_hidden_layers"));
  m.num_attention_heads = fields.size(either("n_head", "num_attention_heads"));
  m.vocab_size = fields.size("vocab_size");
  m.max_position_embeddings = fields.size(either("n_positions", "max_position_embeddings"), 1024);
  m.ffn_hidden_size = fields.size("n_inner", 4 * m.hidden_size);
  if (m.hidden_size % m.num_attention_heads != 0) {
    fields.inconsistent("n_embd " + std::to_string(m.hidden_size) + " is not divisible by n_head " +
                        std::to_string(m.num_attention_heads));
  }
  m.num_query_groups = m.num_attention_heads;
  m.normalization = config::Normalization::kLayerNorm;
  m.norm_epsilon = fields.number("layer_norm_epsilon", 1e-5);
  if (m.norm_epsilon <= 0.0) fields.invalid("layer_norm_epsilon", "a number > 0");
  m.position_embedding_type = config::PositionEmbedding::kLearnedAbsolute;
  const std::string activation = fields.text("activation_function", "gelu_new");
  if (activation == "gelu_new" || activation == "gelu_pytorch_tanh") {
    m.openai_gelu = true;
  } else if (activation != "gelu") {
    fields.unsupported("activation_function", fields.at("activation_function"),
                       "\"gelu_new\", \"gelu_pytorch_tanh\" (tanh GELU) and \"gelu\" (exact GELU)");
  }
  if (!fields.boolean("scale_attn_weights", true)) {
    fields.unsupported("scale_attn_weights", false, "true (scores divided by sqrt(head size))");
  }
  if (fields.boolean("scale_attn_by_inverse_layer_idx", false)) {
    fields.unsupported("scale_attn_by_inverse_layer_idx", true, "false");
  }
  if (fields.boolean("add_cross_attention", false))
    fields.unsupported("add_cross_attention", true, "false (decoder only)");
  m.add_bias_linear = true;
  hf.attention_bias = hf.qkv_bias = hf.mlp_bias = true;
  hf.tie_word_embeddings = fields.boolean("tie_word_embeddings", true);
}

/// eos_token_id as a list: an int, a list of ints, or null (empty).
std::vector<int64_t> token_ids(const Fields& fields, const std::string& key) {
  std::vector<int64_t> ids;
  if (!fields.has(key)) return ids;
  const json& value = fields.at(key);
  const json list = value.is_array() ? value : json::array({value});
  for (const auto& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) fields.invalid(key, "a token id >= 0 or a list of them");
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

void parse_special_tokens(const std::string& folder, const json& config, const std::string& owner, HfConfig& hf) {
  const Fields from_config(join_path(folder, "config.json"), config, owner);
  const std::string generation_path = join_path(folder, "generation_config.json");
  const std::optional<json> generation = read_json_file(generation_path);
  if (generation && !generation->is_object()) {
    throw DataError("'" + generation_path + "' is a JSON " + std::string(generation->type_name()) +
                    ", expected an object; fix: download the model folder again or write it with save_pretrained");
  }
  const json empty = json::object();
  const Fields from_generation(generation_path, generation ? *generation : empty, owner);
  const Fields& eos = from_generation.has("eos_token_id") ? from_generation : from_config;
  hf.eos_token_ids = token_ids(eos, "eos_token_id");
  const Fields& bos = from_generation.has("bos_token_id") ? from_generation : from_config;
  if (bos.has("bos_token_id")) {
    if (!bos.at("bos_token_id").is_number_integer() || bos.at("bos_token_id").get<int64_t>() < 0) {
      bos.invalid("bos_token_id", "a token id >= 0");
    }
    hf.bos_token_id = bos.at("bos_token_id").get<int64_t>();
  }
}

}  // namespace

const char* to_string(HfArchitecture architecture) {
  switch (architecture) {
    case HfArchitecture::kLlama: return "LlamaForCausalLM";
    case HfArchitecture::kQwen2: return "Qwen2ForCausalLM";
    case HfArchitecture::kQwen3: return "Qwen3ForCausalLM";
    case HfArchitecture::kGpt2: return "GPT2LMHeadModel";
    case HfArchitecture::kMixtral: return "MixtralForCausalLM";
    case HfArchitecture::kQwen2Moe: return "Qwen2MoeForCausalLM";
    case HfArchitecture::kQwen3Moe: return "Qwen3MoeForCausalLM";
    case HfArchitecture::kOlmoe: return "OlmoeForCausalLM";
  }
  return "unknown";
}

HfArchitecture attention_family(HfArchitecture architecture) {
  switch (architecture) {
    case HfArchitecture::kMixtral:
    case HfArchitecture::kOlmoe: return HfArchitecture::kLlama;
    case HfArchitecture::kQwen2Moe: return HfArchitecture::kQwen2;
    case HfArchitecture::kQwen3Moe: return HfArchitecture::kQwen3;
    default: return architecture;
  }
}

bool is_moe_architecture(HfArchitecture architecture) { return attention_family(architecture) != architecture; }

HfConfig read_hf_config(const std::string& folder) {
  if (!is_directory(folder)) {
    throw DataError("model folder '" + folder + "' does not exist; fix: pass a folder written by save_pretrained " +
                    "(config.json and model.safetensors), e.g. a download of a Hugging Face model");
  }
  const std::string path = join_path(folder, "config.json");
  const std::optional<json> config = read_json_file(path);
  if (!config) {
    throw DataError("model folder '" + folder + "' has no config.json; fix: pass a folder written by save_pretrained " +
                    "(config.json and model.safetensors)");
  }
  if (!config->is_object()) {
    throw DataError("'" + path + "' is a JSON " + std::string(config->type_name()) +
                    ", expected an object; fix: " + "download the model folder again or write it with save_pretrained");
  }
  HfConfig hf;
  hf.architecture = parse_architecture(Fields(path, *config, "a Hugging Face model"), path, *config);
  const Fields fields(path, *config, to_string(hf.architecture));
  if (hf.architecture == HfArchitecture::kGpt2) {
    parse_gpt2(fields, hf);
  } else {
    parse_llama_family(fields, hf);
    if (is_moe_architecture(hf.architecture)) parse_moe(fields, hf);
  }
  config::ModelConfig& m = hf.model;
  if (hf.moe_layers.empty()) hf.moe_layers.assign(static_cast<std::size_t>(m.num_layers), false);
  m.untie_embeddings_and_output_weights = !hf.tie_word_embeddings;
  m.seq_length = *m.max_position_embeddings;
  m.attention_dropout = 0.0;
  m.hidden_dropout = 0.0;
  const std::string dtype_key = fields.has("dtype") ? "dtype" : "torch_dtype";
  if (fields.has(dtype_key)) {
    const std::string dtype = fields.text(dtype_key, "");
    if (dtype != "float32" && dtype != "float16" && dtype != "bfloat16" && dtype != "float64") {
      fields.unsupported(dtype_key, fields.at(dtype_key), "\"float32\", \"bfloat16\", \"float16\" and \"float64\"");
    }
    hf.dtype = dtype;
  }
  parse_special_tokens(folder, *config, to_string(hf.architecture), hf);
  return hf;
}

}  // namespace graphed::hf
