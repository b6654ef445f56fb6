// capture/cuda_graph_runner.h — one runner of the local implementation (research
// megatron-cudagraphs.md §2.2, §2.5, §2.7–2.9; Megatron's _CudaGraphRunner): one unit's forward and
// backward graphs for one argument signature. A training runner first runs the unit eagerly and reports
// its first call and first backward to the registry (recording); GraphRegistry::create_cudagraphs then
// captures it in the recorded order, and every later call replays it with autograd through the replay.
// A forward-only runner (calls without grad: evaluation) captures on its first call and replays from
// then on (the inline path, §2.14). Owned by a CudaGraphManager; model-agnostic.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/unit_runner.h"

namespace graphed::capture {

namespace detail {
struct GraphedUnitState;
}
class GraphRegistry;
struct RecordTracker;

/// How the local implementation captures.
struct LocalGraphOptions {
  /// Eager forward (+ backward) passes of each unit right before its capture, on copies of the
  /// recorded arguments (lazy initialization, autotuning); >= 1.
  int64_t warmup_passes = 1;
  /// Capture backward graphs with retain_graph.
  bool retain_backward_graph = false;
  /// §2.8.1: once a graph's backward is captured, the pool memory of its outputs and input grads goes
  /// back to the pool (the runners keep non-owning aliases), so later graphs reuse it.
  bool release_buffers = true;
  /// Forward-only (evaluation) graphs share the training graphs' pool; otherwise they get a pool of
  /// their own.
  bool shared_evaluation_pool = true;
  /// Megatron captures local graphs in thread-local mode.
  CaptureMode mode = CaptureMode::kThreadLocal;
  /// §2.4's per-microbatch mode (pipeline parallelism): every call of the recording iteration gets a
  /// runner of its own, and later iterations take them round-robin in that order. Graphs then replay in
  /// the order they were captured, which pool sharing needs when several microbatches are in flight.
  bool per_microbatch_runners = false;
};

/// A training runner's static inputs, as the registry resolved them from the record.
struct StaticInputs {
  std::vector<at::Tensor> buffers;     ///< one per argument
  std::vector<bool> from_output;       ///< the buffer is an earlier graph's output: calls must pass it
  std::vector<std::string> producers;  ///< for those: "output 0 of unit layers.0.layer"
};

class CudaGraphRunner {
 public:
  enum class Kind { kTraining, kForwardOnly };
  /// arguments: the call that creates the runner; its signature is the runner's.
  CudaGraphRunner(GraphableUnit unit, Kind kind, int64_t id, const std::vector<at::Tensor>& arguments);
  ~CudaGraphRunner();
  CudaGraphRunner(const CudaGraphRunner&) = delete;
  CudaGraphRunner& operator=(const CudaGraphRunner&) = delete;

  int64_t id() const { return id_; }
  const GraphableUnit& unit() const;
  /// "layers.0.layer (runner 3)"
  std::string label() const;
  /// No backward of an earlier forward is pending (Megatron's FWD_READY).
  bool is_ready_for_forward() const;
  /// How a call's arguments differ from this runner's signature, one line per argument ("argument
  /// 'hidden' (argument 0): got ...; recorded ..."); empty when they match.
  std::vector<std::string> mismatches(const std::vector<at::Tensor>& arguments) const;
  bool is_captured() const;
  /// 2 with a backward graph, 1 without, 0 before the capture.
  int64_t graph_count() const;

  // ---- recording (training runners, before create_cudagraphs) ----------------------------------
  /// Runs the unit eagerly. The first call is reported to the registry (arguments and outputs), and
  /// so is the first backward pass, through a no-op autograd node on the first output that needs grad.
  std::vector<at::Tensor> record(const std::vector<at::Tensor>& arguments, GraphRegistry& registry);
  /// The recorded call's arguments (detached): warmup values and the first contents of fresh buffers.
  const std::vector<at::Tensor>& recorded_arguments() const { return recorded_arguments_; }

  // ---- creation (the registry calls these in record order) --------------------------------------
  /// Warms up on copies of the recorded arguments and captures the forward graph over `inputs`.
  /// accumulate_in_graph: per unit parameter, whether its grads are added to param.grad inside the graph.
  void capture_forward(StaticInputs inputs, std::vector<bool> accumulate_in_graph, const GraphPool& pool,
                       const LocalGraphOptions& options, const at::Device& device);
  /// Captures the backward graph; seeds (one per output, defined where it needs grad) become the
  /// grad-output buffers.
  void capture_backward(const std::vector<at::Tensor>& seeds, const GraphPool& pool, const LocalGraphOptions& options);
  /// A recorded runner whose outputs need no grad: it keeps a forward graph only.
  void skip_backward();
  /// After the backward capture: drops the autograd graph of the forward capture. give_back_memory:
  /// the outputs, and the inputs and grad outputs that alias other runners' buffers (seed_is_alias: per
  /// output, its grad-output buffer is another graph's input-grad buffer), become non-owning
  /// aliases, so that their memory goes back to the pool once no runner owns it and later graphs reuse
  /// it (§2.8.1). Outputs are safe to give back: whatever reads one in the forward is done with it before
  /// this unit's backward, which precedes every later capture's replay. Input grads stay owned: autograd
  /// may hold one in a sum with other grads while later graphs replay.
  void release_buffers(bool give_back_memory, const std::vector<bool>& seed_is_alias);
  /// After every capture: the runner replays from now on.
  void finish_capture();
  /// The buffers a replay reads and writes: static input i, static output i, the grad-output buffer
  /// of output i and the grad buffer of argument i (undefined where there is none).
  const at::Tensor& static_input(std::size_t index) const;
  const at::Tensor& static_output(std::size_t index) const;
  const at::Tensor& static_grad_output(std::size_t index) const;
  const at::Tensor& static_grad_input(std::size_t index) const;
  std::size_t output_count() const;
  bool output_requires_grad(std::size_t index) const;

  // ---- after creation ----------------------------------------------------------------------------
  /// Replays (training: autograd runs the backward graph when grads flow).
  std::vector<at::Tensor> replay(const std::vector<at::Tensor>& arguments);
  /// Forward-only runners: captures on this call, then replays. Arguments that are outputs of the
  /// registry's forward-only graphs are used as static inputs directly (chained), others are copied.
  std::vector<at::Tensor> capture_inline(const std::vector<at::Tensor>& arguments, GraphRegistry& registry);

 private:
  void warm_up(const LocalGraphOptions& options, const at::Device& device);

  std::shared_ptr<detail::GraphedUnitState> state_;
  std::shared_ptr<RecordTracker> tracker_;
  Kind kind_;
  int64_t id_;
  bool forward_recorded_ = false;
  /// CUDA autocast was on for the recorded call: the capture runs under it too (graphed's autocast is
  /// always bf16, compat::AutocastScope).
  bool autocast_ = false;
  std::vector<at::Tensor> recorded_arguments_;
};

}  // namespace graphed::capture
