// capture/graph_registry.h — the local implementation's shared state (research
// megatron-cudagraphs.md §2.1, §2.6, §2.13–2.15), owned by the caller instead of living in process
// globals: the phase (eager, recording, created), the record of the recording iteration, the graph
// pools, and the operations on every runner at once — create_cudagraphs() captures every recorded
// graph in the recorded order into one pool, delete_cuda_graphs() frees them all. CudaGraphManagers
// register here. Model-agnostic.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "graphed/capture/capture_memory.h"
#include "graphed/capture/cuda_graph.h"
#include "graphed/capture/cuda_graph_runner.h"
#include "graphed/capture/local_record.h"

namespace graphed::capture {

class CudaGraphManager;

/// kEager: managers run their units eagerly (warmup iterations). kRecording: training calls run
/// eagerly through runners that record the iteration. kCreated: training calls replay graphs.
enum class LocalPhase { kEager, kRecording, kCreated };

/// What create_cudagraphs() did.
struct LocalCreation {
  int64_t runners = 0;   ///< training runners captured
  int64_t graphs = 0;    ///< forward plus backward graphs
  double seconds = 0;    ///< warmup passes and captures
  CaptureMemory memory;  ///< graph-pool growth and the graphs' own memory
};

class GraphRegistry {
 public:
  /// pool: the training graphs' pool, shared with other graphs of the caller (e.g. an optimizer
  /// graph that replays after them); default: a new pool.
  GraphRegistry(const at::Device& device, LocalGraphOptions options, GraphPool pool = GraphPool());
  ~GraphRegistry();
  GraphRegistry(const GraphRegistry&) = delete;
  GraphRegistry& operator=(const GraphRegistry&) = delete;

  LocalPhase phase() const { return phase_; }
  /// kEager -> kRecording: the next training calls record.
  void start_recording();
  /// kRecording -> kCreated: warms up and captures every recorded runner, forwards and backwards in
  /// the recorded order, into the training pool; restores the random state afterwards. Throws
  /// CaptureError (every runner is then reset; after a failed capture the CUDA RNG is unusable).
  LocalCreation create_cudagraphs();
  /// Frees every graph (training and forward-only), the record and the pools; the phase returns to
  /// kRecording (or stays kEager), so the next training iteration records again. pool: the new
  /// training pool (LibTorch cannot reuse a pool once its graphs are gone); default: a new one.
  void delete_cuda_graphs(GraphPool pool = GraphPool());

  /// While alive, calls without grad capture forward-only graphs (evaluation) instead of running eagerly.
  class EvaluationScope {
   public:
    explicit EvaluationScope(GraphRegistry& registry);
    ~EvaluationScope();
    EvaluationScope(const EvaluationScope&) = delete;
    EvaluationScope& operator=(const EvaluationScope&) = delete;

   private:
    GraphRegistry& registry_;
  };
  bool evaluation_graphs_enabled() const { return evaluation_scopes_ > 0; }

  /// Training and forward-only runners over every manager, and their graphs.
  int64_t runner_count() const;
  int64_t graph_count() const;
  const LocalRecord& record() const { return record_; }
  const LocalGraphOptions& options() const { return options_; }
  const at::Device& device() const { return device_; }
  const GraphPool& evaluation_pool() const { return options_.shared_evaluation_pool ? pool_ : evaluation_pool_; }

  // ---- for managers and runners --------------------------------------------------------------------
  void add_manager(CudaGraphManager* manager);
  void remove_manager(CudaGraphManager* manager);
  int64_t next_runner_id() { return next_runner_id_++; }
  /// A runner's first forward (recording phase): arguments and outputs by tensor identity.
  void record_forward(CudaGraphRunner& runner, const std::vector<at::Tensor>& arguments,
                      const std::vector<at::Tensor>& outputs);
  /// Where runners report their first backward (a weak handle: the registry may be gone by then).
  std::weak_ptr<std::function<void(int64_t)>> backward_sink() const { return backward_sink_; }
  /// Forward-only graphs' outputs, so that the next forward-only graph reads them in place.
  bool is_forward_only_output(const at::Tensor& tensor) const;
  void add_forward_only_outputs(const std::vector<at::Tensor>& outputs);

 private:
  void record_backward(int64_t runner);
  int64_t tensor_id(const at::Tensor& tensor);
  void capture_in_record_order(const LocalBufferPlan& plan);
  StaticInputs static_inputs_of(const CudaGraphRunner& runner, const LocalBufferPlan& plan,
                                std::vector<at::Tensor>& shared);
  void capture_backward_of(CudaGraphRunner& runner, const LocalBufferPlan& plan);
  void forget_runners();
  void clear_record();

  at::Device device_;
  LocalGraphOptions options_;
  GraphPool pool_;
  GraphPool evaluation_pool_;
  LocalPhase phase_ = LocalPhase::kEager;
  int evaluation_scopes_ = 0;
  int64_t next_runner_id_ = 0;
  std::vector<CudaGraphManager*> managers_;  ///< not owned; each unregisters when destroyed
  LocalRecord record_;
  std::map<int64_t, CudaGraphRunner*> recorded_;  ///< not owned (their managers own them)
  /// Recorded tensors by identity (address, shape, strides, dtype), held until creation so that no
  /// freed address is mistaken for another tensor.
  std::map<std::vector<int64_t>, int64_t> tensor_ids_;
  std::vector<at::Tensor> held_;
  std::set<const void*> forward_only_outputs_;
  std::shared_ptr<std::function<void(int64_t)>> backward_sink_;
};

}  // namespace graphed::capture
