// config/cuda_graph_config.h — the CUDA-graph configuration: Megatron's three orthogonal fields
// (impl, per-layer modules, inference scope) and their companions, as the user gave them
// (CudaGraphInputs, legacy inputs included) and after migration (CudaGraphConfig).
// migrate_cuda_graph_inputs() follows research/megatron-cudagraphs.md §1.3–1.6 and the seed-002
// migration table. Rules that need the model (MoE, recompute, dropout) live in config/validation.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graphed/config/config_issue.h"

namespace graphed::config {

/// --cuda-graph-impl: which capture backend trains the model.
enum class CudaGraphImpl { kNone, kLocal, kTransformerEngine, kFullIteration };
/// --cuda-graph-modules: per-layer capture regions (Megatron's CudaGraphModule ordinals).
enum class CudaGraphModule { kAttn = 1, kMlp = 2, kMoe = 3, kMoeRouter = 4, kMoePreprocess = 5, kMamba = 6 };
/// --inference-cuda-graph-scope: who owns inference graphs.
enum class InferenceCudaGraphScope { kNone = 1, kLayer = 2, kBlock = 3 };

std::string to_string(CudaGraphImpl impl);
std::string to_string(CudaGraphModule module);
std::string to_string(InferenceCudaGraphScope scope);
/// "attn mlp", or "(whole layer)" when empty.
std::string to_string(const std::vector<CudaGraphModule>& modules);

std::optional<CudaGraphImpl> parse_cuda_graph_impl(const std::string& name);
std::optional<CudaGraphModule> parse_cuda_graph_module(const std::string& name);
std::optional<InferenceCudaGraphScope> parse_inference_cuda_graph_scope(const std::string& name);

/// The valid spellings, in declaration order.
const std::vector<std::string>& cuda_graph_impl_names();
const std::vector<std::string>& cuda_graph_module_names();
/// Module names plus the deprecated values still accepted and migrated: full, full_iteration,
/// full_iteration_inference.
const std::vector<std::string>& cuda_graph_module_input_names();
const std::vector<std::string>& inference_cuda_graph_scope_names();

/// The CUDA-graph settings as the user gave them, before migration.
struct CudaGraphInputs {
  /// --cuda-graph-impl; default none.
  std::string impl = "none";
  /// --cuda-graph-modules tokens; unset by default (= whole layer). May hold deprecated values.
  std::optional<std::vector<std::string>> modules;
  /// --cuda-graph-scope (deprecated alias of --cuda-graph-modules).
  std::optional<std::vector<std::string>> scope;
  /// --enable-cuda-graph (deprecated: --cuda-graph-impl local).
  bool enable_cuda_graph = false;
  /// --external-cuda-graph (deprecated: --cuda-graph-impl transformer_engine).
  bool external_cuda_graph = false;
  /// --inference-cuda-graph-scope; unset resolves to layer for local, none otherwise.
  std::optional<std::string> inference_scope;
  /// --cuda-graph-warmup-steps: eager iterations before capture; default 3, must be >= 1.
  int64_t warmup_steps = 3;
  /// --cuda-graph-use-single-mempool: an impl's graphs share one pool (full_iteration: training and
  /// evaluation; local: training, evaluation and optimizer step; transformer_engine: units and
  /// optimizer step); default on.
  bool use_single_mempool = true;
  /// --cuda-graph-retain-backward-graph: capture backward with retain_graph; default off.
  bool retain_backward_graph = false;
  /// --optimizer-cuda-graph: graph the optimizer step; default off.
  bool optimizer_cuda_graph = false;
  /// --cuda-graph-stage-units: local and transformer_engine also graph the first-stage unit (embedding),
  /// the last-stage unit (final norm, output layer, loss) and the clipping + optimizer step; default on.
  bool stage_units = true;
  /// --te-rng-tracker: Megatron's graph-safe RNG tracker. Accepted for Megatron scripts; it changes
  /// nothing in graphed, whose graphs always register the generator they draw from (VA-9 says so).
  bool te_rng_tracker = false;
  /// --check-for-nan-in-loss-and-grad: device-side, deferred NaN check; default on.
  bool check_for_nan_in_loss_and_grad = true;
  /// --inference-dynamic-batching-num-cuda-graphs: decode buckets for the local impl; > 0 or -1 (auto).
  int64_t inference_num_cuda_graphs = 16;
};

/// The CUDA-graph configuration after migration and normalization.
struct CudaGraphConfig {
  CudaGraphImpl impl = CudaGraphImpl::kNone;
  /// Per-layer capture regions; empty = the whole layer (local / transformer_engine only).
  std::vector<CudaGraphModule> modules;
  InferenceCudaGraphScope inference_scope = InferenceCudaGraphScope::kNone;
  int64_t warmup_steps = 3;
  bool use_single_mempool = true;
  bool retain_backward_graph = false;
  bool optimizer_cuda_graph = false;
  /// local / transformer_engine: graph the embedding, the loss and the optimizer step too.
  bool stage_units = true;
  bool check_for_nan_in_loss_and_grad = true;
  int64_t inference_num_cuda_graphs = 16;

  bool has_module(CudaGraphModule module) const;
  /// impl is local or transformer_engine (the per-layer implementations).
  bool is_per_layer() const;
  /// Megatron's "full_cg": impl is full_iteration, or a per-layer impl capturing whole layers.
  bool captures_full_layers() const;
};

/// Applies research §1.6 steps 1–9 in order: boolean-flag migration (TC-1, TC-2, M1, M2), the
/// renamed --cuda-graph-scope (TC-3, M3), module normalization (N1, M4), deprecated module values
/// (N2–N6, M5–M7), inference-scope default and allowed-scope check (TC-5), full_iteration with
/// modules (TC-6) and impl none with modules (BR-1). Every finding is appended to issues; the
/// result is meaningful only when no error was added.
CudaGraphConfig migrate_cuda_graph_inputs(const CudaGraphInputs& inputs, IssueList& issues);

}  // namespace graphed::config
