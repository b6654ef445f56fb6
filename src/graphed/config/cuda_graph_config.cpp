// config/cuda_graph_config.cpp — enum spellings and the migration/normalization of
// research/megatron-cudagraphs.md §1.3–1.6. Messages are pinned by tests/config/cuda_graph_config_test.cpp
// and listed in docs/configuration.md.
#include "graphed/config/cuda_graph_config.h"

#include <algorithm>
#include <set>

#include "graphed/util/text.h"

namespace graphed::config {
namespace {

template <typename Enum>
std::optional<Enum> parse_from(const std::vector<std::string>& names, const std::string& name, int first_ordinal) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<Enum>(static_cast<int>(i) + first_ordinal);
  }
  return std::nullopt;
}

std::string words(const std::vector<std::string>& tokens) {
  return tokens.empty() ? std::string("(empty)") : join(tokens, " ");
}

/// Megatron treats "full", None and [] as "modules not set" when the old field is migrated.
bool modules_are_set(const std::optional<std::vector<std::string>>& modules) {
  if (!modules || modules->empty()) return false;
  return !(modules->size() == 1 && modules->front() == "full");
}

struct ModuleTokens {
  std::vector<std::string> tokens;  // raw tokens to normalize
  std::string flag;                 // the flag the user spelled them with
};

/// Step 1: --enable-cuda-graph / --external-cuda-graph.
void migrate_boolean_flags(const CudaGraphInputs& inputs, CudaGraphImpl& impl, IssueList& issues) {
  if (!inputs.enable_cuda_graph && !inputs.external_cuda_graph) return;
  bool valid = true;
  const auto reject_with_impl = [&](const std::string& flag, const std::string& meaning) {
    issues.error("TC-1", flag + " cannot be combined with --cuda-graph-impl " + to_string(impl) + "; fix: drop " +
                             flag + ", it is the deprecated spelling of " + meaning);
    valid = false;
  };
  if (impl != CudaGraphImpl::kNone) {
    if (inputs.enable_cuda_graph) reject_with_impl("--enable-cuda-graph", "--cuda-graph-impl local");
    if (inputs.external_cuda_graph) reject_with_impl("--external-cuda-graph", "--cuda-graph-impl transformer_engine");
  }
  if (inputs.enable_cuda_graph && inputs.external_cuda_graph) {
    issues.error("TC-2",
                 "--enable-cuda-graph and --external-cuda-graph cannot both be set; fix: pass "
                 "--cuda-graph-impl local or --cuda-graph-impl transformer_engine instead");
    valid = false;
  }
  if (!valid) return;
  if (inputs.enable_cuda_graph) {
    issues.warn("M1", "--enable-cuda-graph is deprecated; using --cuda-graph-impl local");
    impl = CudaGraphImpl::kLocal;
  } else {
    issues.warn("M2", "--external-cuda-graph is deprecated; using --cuda-graph-impl transformer_engine");
    impl = CudaGraphImpl::kTransformerEngine;
  }
}

/// Step 2: --cuda-graph-scope (renamed to --cuda-graph-modules).
ModuleTokens migrate_renamed_field(const CudaGraphInputs& inputs, IssueList& issues) {
  ModuleTokens result{inputs.modules.value_or(std::vector<std::string>{}), "--cuda-graph-modules"};
  if (!inputs.scope) return result;
  if (modules_are_set(inputs.modules)) {
    issues.error("TC-3",
                 "--cuda-graph-scope and --cuda-graph-modules cannot be used together, got "
                 "--cuda-graph-scope " +
                     words(*inputs.scope) + " and --cuda-graph-modules " + words(*inputs.modules) +
                     "; fix: keep only --cuda-graph-modules");
    return result;
  }
  issues.warn("M3", "--cuda-graph-scope is deprecated; using --cuda-graph-modules " + words(*inputs.scope));
  return {*inputs.scope, "--cuda-graph-scope"};
}

/// Steps 3-6: normalize the tokens, validate and apply the deprecated values.
std::vector<CudaGraphModule> normalize_modules(const ModuleTokens& given, CudaGraphImpl& impl,
                                               std::optional<std::string>& inference_scope, IssueList& issues) {
  const std::string& flag = given.flag;
  const auto& tokens = given.tokens;
  std::vector<CudaGraphModule> modules;
  if (std::find(tokens.begin(), tokens.end(), "full") != tokens.end()) {
    if (tokens.size() != 1) {
      issues.error("N1", "full cannot be combined with other values in " + flag + ", got " + words(tokens) +
                             "; fix: omit " + flag + " to capture the whole layer, or list only the modules");
    } else {
      issues.warn("M4", flag + " full is deprecated; using an empty --cuda-graph-modules (the whole layer)");
    }
    return modules;
  }
  std::vector<std::string> deprecated;
  for (const auto& token : tokens) {
    if (token == "full_iteration" || token == "full_iteration_inference") {
      if (std::find(deprecated.begin(), deprecated.end(), token) == deprecated.end()) deprecated.push_back(token);
    } else if (const auto module = parse_cuda_graph_module(token)) {
      if (std::find(modules.begin(), modules.end(), *module) == modules.end()) modules.push_back(*module);
    } else {
      issues.error("N7", "unknown value '" + token + "' in " + flag + "; fix: use one of " +
                             join(cuda_graph_module_names(), ", ") + " (or omit " + flag + " for the whole layer)");
    }
  }
  if (deprecated.size() > 1) {
    issues.error("N2", flag +
                           " cannot contain both full_iteration and full_iteration_inference; fix: use "
                           "--cuda-graph-impl full_iteration for training graphs or "
                           "--inference-cuda-graph-scope block for inference graphs, not both");
    return modules;
  }
  if (deprecated.empty()) return modules;
  const std::string scope_given = inference_scope.value_or("");
  if (deprecated.front() == "full_iteration") {
    bool valid = true;
    if (impl == CudaGraphImpl::kTransformerEngine) {
      issues.error("N3", flag +
                             " full_iteration cannot be combined with --cuda-graph-impl "
                             "transformer_engine; fix: use --cuda-graph-impl full_iteration and drop "
                             "full_iteration from " +
                             flag);
      valid = false;
    }
    if (inference_scope && scope_given != "none") {
      issues.error("N4", flag + " full_iteration cannot be combined with --inference-cuda-graph-scope " + scope_given +
                             "; fix: drop --inference-cuda-graph-scope (full_iteration "
                             "makes no inference graphs)");
      valid = false;
    }
    if (valid) {
      issues.warn("M5", flag + " full_iteration is deprecated; using --cuda-graph-impl full_iteration");
      impl = CudaGraphImpl::kFullIteration;
    }
    return modules;
  }
  bool valid = true;
  if (impl != CudaGraphImpl::kNone && impl != CudaGraphImpl::kLocal) {
    issues.error("N5", flag + " full_iteration_inference cannot be combined with --cuda-graph-impl " + to_string(impl) +
                           "; fix: use --cuda-graph-impl local "
                           "--inference-cuda-graph-scope block");
    valid = false;
  }
  if (inference_scope && scope_given != "block") {
    issues.error("N6", flag +
                           " full_iteration_inference cannot be combined with "
                           "--inference-cuda-graph-scope " +
                           scope_given +
                           "; fix: use --inference-cuda-graph-scope block and drop "
                           "full_iteration_inference from " +
                           flag);
    valid = false;
  }
  if (!valid) return modules;
  if (impl == CudaGraphImpl::kNone) {
    issues.warn("M7", flag + " full_iteration_inference has no effect with --cuda-graph-impl none; ignored");
  } else {
    issues.warn("M6", flag + " full_iteration_inference is deprecated; using --inference-cuda-graph-scope block");
    inference_scope = "block";
  }
  return modules;
}

/// Step 8-9: default and check the inference scope (§1.5).
InferenceCudaGraphScope resolve_inference_scope(const std::optional<std::string>& given, CudaGraphImpl impl,
                                                IssueList& issues) {
  if (!given) return impl == CudaGraphImpl::kLocal ? InferenceCudaGraphScope::kLayer : InferenceCudaGraphScope::kNone;
  const auto scope = parse_inference_cuda_graph_scope(*given);
  if (!scope) {
    issues.error("TC-5", "unknown --inference-cuda-graph-scope '" + *given + "'; fix: use one of " +
                             join(inference_cuda_graph_scope_names(), ", "));
    return InferenceCudaGraphScope::kNone;
  }
  const bool local = impl == CudaGraphImpl::kLocal;
  const bool allowed = local ? *scope != InferenceCudaGraphScope::kNone : *scope == InferenceCudaGraphScope::kNone;
  if (!allowed) {
    issues.error("TC-5", "--inference-cuda-graph-scope " + *given + " is not supported with --cuda-graph-impl " +
                             to_string(impl) + "; fix: " +
                             (local ? "use layer (the default for local) or block"
                                    : "drop --inference-cuda-graph-scope (only --cuda-graph-impl local "
                                      "makes inference graphs)"));
  }
  return *scope;
}

}  // namespace

std::string to_string(CudaGraphImpl impl) { return cuda_graph_impl_names()[static_cast<std::size_t>(impl)]; }
std::string to_string(CudaGraphModule module) {
  return cuda_graph_module_names()[static_cast<std::size_t>(module) - 1];
}
std::string to_string(InferenceCudaGraphScope scope) {
  return inference_cuda_graph_scope_names()[static_cast<std::size_t>(scope) - 1];
}
std::string to_string(const std::vector<CudaGraphModule>& modules) {
  if (modules.empty()) return "(whole layer)";
  std::vector<std::string> names;
  for (const auto module : modules) names.push_back(to_string(module));
  return join(names, " ");
}

std::optional<CudaGraphImpl> parse_cuda_graph_impl(const std::string& name) {
  return parse_from<CudaGraphImpl>(cuda_graph_impl_names(), name, 0);
}
std::optional<CudaGraphModule> parse_cuda_graph_module(const std::string& name) {
  return parse_from<CudaGraphModule>(cuda_graph_module_names(), name, 1);
}
std::optional<InferenceCudaGraphScope> parse_inference_cuda_graph_scope(const std::string& name) {
  return parse_from<InferenceCudaGraphScope>(inference_cuda_graph_scope_names(), name, 1);
}

const std::vector<std::string>& cuda_graph_impl_names() {
  static const std::vector<std::string> names{"none", "local", "transformer_engine", "full_iteration"};
  return names;
}
const std::vector<std::string>& cuda_graph_module_names() {
  static const std::vector<std::string> names{"attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"};
  return names;
}
const std::vector<std::string>& cuda_graph_module_input_names() {
  static const std::vector<std::string> names{"attn",
                                              "mlp",
                                              "moe",
                                              "moe_router",
                                              "moe_preprocess",
                                              "mamba",
                                              "full",
                                              "full_iteration",
                                              "full_iteration_inference"};
  return names;
}
const std::vector<std::string>& inference_cuda_graph_scope_names() {
  static const std::vector<std::string> names{"none", "layer", "block"};
  return names;
}

bool CudaGraphConfig::has_module(CudaGraphModule module) const {
  return std::find(modules.begin(), modules.end(), module) != modules.end();
}

bool CudaGraphConfig::is_per_layer() const {
  return impl == CudaGraphImpl::kLocal || impl == CudaGraphImpl::kTransformerEngine;
}

bool CudaGraphConfig::captures_full_layers() const {
  return impl == CudaGraphImpl::kFullIteration || (is_per_layer() && modules.empty());
}

CudaGraphConfig migrate_cuda_graph_inputs(const CudaGraphInputs& inputs, IssueList& issues) {
  CudaGraphConfig config;
  config.warmup_steps = inputs.warmup_steps;
  config.use_single_mempool = inputs.use_single_mempool;
  config.retain_backward_graph = inputs.retain_backward_graph;
  config.optimizer_cuda_graph = inputs.optimizer_cuda_graph;
  config.stage_units = inputs.stage_units;
  config.check_for_nan_in_loss_and_grad = inputs.check_for_nan_in_loss_and_grad;
  config.inference_num_cuda_graphs = inputs.inference_num_cuda_graphs;

  const auto impl = parse_cuda_graph_impl(inputs.impl);
  if (!impl) {
    issues.error("TC-4", "unknown --cuda-graph-impl '" + inputs.impl + "'; fix: use one of " +
                             join(cuda_graph_impl_names(), ", "));
    return config;
  }
  config.impl = *impl;
  migrate_boolean_flags(inputs, config.impl, issues);
  const ModuleTokens tokens = migrate_renamed_field(inputs, issues);
  std::optional<std::string> inference_scope = inputs.inference_scope;
  config.modules = normalize_modules(tokens, config.impl, inference_scope, issues);
  config.inference_scope = resolve_inference_scope(inference_scope, config.impl, issues);

  if (config.impl == CudaGraphImpl::kFullIteration && !config.modules.empty()) {
    issues.error("TC-6", "--cuda-graph-modules must be empty with --cuda-graph-impl full_iteration, got " +
                             to_string(config.modules) +
                             "; fix: drop --cuda-graph-modules (the whole iteration is one graph)");
  }
  if (config.impl == CudaGraphImpl::kNone && !config.modules.empty()) {
    issues.warn("BR-1", "--cuda-graph-modules " + to_string(config.modules) +
                            " has no effect with --cuda-graph-impl none: nothing is graphed (the list is kept, "
                            "as Megatron keeps it)");
  }
  return config;
}

}  // namespace graphed::config
