// train/trainer.h — the training loop (DESIGN.md §7). One iteration, top to bottom: the learning rate
// written to the device, the microbatches loaded on the host, then the iteration runner of the chosen
// --cuda-graph-impl (train/iteration_runner.h): forward/backward over all microbatches with losses
// accumulated on the device, sync-free grad-norm clipping folded into the fused AdamW step, eagerly or
// through graphs. The NaN flag is accumulated on the device; the host reads losses only at
// --log-interval.
#pragma once

#include <fstream>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "graphed/config/run_config.h"
#include "graphed/dist/parallel_layout.h"
#include "graphed/model/gpt_model.h"
#include "graphed/runtime/peak_throughput.h"
#include "graphed/runtime/precision.h"
#include "graphed/train/adamw.h"
#include "graphed/train/event_log.h"
#include "graphed/train/gradient_shards.h"
#include "graphed/train/iteration_runner.h"
#include "graphed/train/tensor_parallel_checkpoint.h"
#include "graphed/train/token_dataset.h"
#include "graphed/train/training_step.h"

namespace graphed::dist {
class ProcessGroups;
}

namespace graphed::train {

struct OptionalState;  // train/checkpoint.h

class Progress;

/// One log interval as printed and written to --metrics-file.
struct IntervalRecord {
  int64_t iteration = 0;  ///< 1-based, last iteration of the interval
  double learning_rate = 0, loss = 0, grad_norm = 0, ms_per_iteration = 0, tokens_per_second = 0, tflops = 0;
};

struct TrainSummary {
  int64_t first_iteration = 0;  ///< the iterations done before this run (the checkpoint's; 0 from scratch)
  int64_t last_iteration = 0;   ///< the iterations done when the loop ended (this run's and the earlier ones)
  bool stopped = false;         ///< the loop ended early, on a stop request
  std::optional<std::string> last_checkpoint;  ///< the folder this run saved last, if any
  double seconds = 0;                          ///< the loop's wall time (evaluations and checkpoints included)
  double tokens = 0;                           ///< tokens trained on by this run (from the start or the checkpoint)
  std::vector<IntervalRecord> intervals;
  std::vector<std::pair<int64_t, double>> validation_losses;  ///< (iteration, loss)
  int64_t peak_memory_bytes = 0;  ///< the device's peak allocated bytes over the run (0 on the CPU)
  int64_t paged_stash_bytes = 0;  ///< --moe-paged-stash: the pools' bytes (0 without)
  int64_t adam_moment_bytes = 0;  ///< the Adam moments this rank keeps (its shards' with the distributed optimizer)
  int64_t master_bytes = 0;       ///< the parameters' fp32 values this rank keeps (of some, only its shards)
};

class Trainer {
 public:
  /// Builds the model (initialized from --seed on the CPU, then moved to the device), the optimizer
  /// and the iteration runner of --cuda-graph-impl. groups: this rank's process groups when the run has
  /// several ranks (they outlive the trainer), else null: the one place the trainer learns of other
  /// ranks. Every rank reads its shard of each global batch; only rank 0 writes metrics, checkpoints
  /// and progress.
  Trainer(const config::RunConfig& config, TokenDataset data, const at::Device& device,
          dist::ProcessGroups* groups = nullptr);
  ~Trainer();

  /// Runs 0-based iteration `iteration` through the iteration runner.
  IterationStats train_step(int64_t iteration);
  /// Mean validation loss over --eval-iters iterations' worth of batches (round picks the batches).
  double evaluate(int64_t round);
  /// The loop from start_iteration() to --train-iters: logging, evaluation, checkpoints, each an
  /// event of `log`; a TTY progress bar to stderr. Log intervals time training only (evaluations and
  /// checkpoints between two log lines are left out). stop_requested, when given, is asked after every
  /// iteration (with several ranks: at log lines, and all ranks stop if one was asked): the loop then
  /// logs the partial interval, saves (with --save) and ends, summary.stopped set. Throws
  /// graphed::Error on NaN when the check is on.
  TrainSummary train(EventLog& log, const std::function<bool()>& stop_requested = {});
  /// The same, printing text lines to out.
  TrainSummary train(std::ostream& out);

  /// A sample continuing --sample-prompt: the prompt and --sample-tokens bytes drawn with
  /// --sample-temperature and --sample-top-k from a generator seeded by --seed and the iteration, never
  /// an id past the 256 bytes, as UTF-8 (invalid sequences replaced by U+FFFD); nullopt without
  /// byte-level data or with --sample-tokens 0. Graphed units run eagerly.
  std::optional<std::string> sample(int64_t iteration);
  /// The device's peak for MFU, when known.
  const std::optional<runtime::PeakThroughput>& peak() const { return peak_; }
  /// The precision the run computes in (chosen once, by its training step).
  runtime::Precision precision() const;

  /// Loads --load; the loop then continues after the checkpoint's iteration.
  void load(const std::string& dir);
  /// Saves the state after `iterations` iterations under --save.
  std::string save(int64_t iterations);

  model::GptModel& model() { return model_; }
  AdamW& optimizer() { return *optimizer_; }
  const TokenDataset& data() const { return data_; }
  const at::Device& device() const { return device_; }
  const dist::ParallelLayout& layout() const { return layout_; }
  /// Whether this rank prints, writes metrics and checkpoints (rank 0).
  bool is_main_rank() const { return layout_.rank == 0; }
  int64_t start_iteration() const { return start_iteration_; }
  /// After load(): the state the model's paths keep across steps (FP8 delayed scaling) that the checkpoint
  /// did not hold and that therefore starts afresh. Checkpoints hold it only where one process holds the
  /// whole model (no tensor or pipeline parallelism).
  const std::vector<std::string>& state_not_in_checkpoint() const { return state_not_in_checkpoint_; }
  /// The whole model's parameters, also where this rank holds a part of them (tensor or expert parallelism).
  int64_t whole_parameter_count() const;
  /// Tokens of one iteration (global batch x sequence length).
  double tokens_per_iteration() const;
  /// Model FLOPs of one iteration (forward + backward), Megatron's estimate.
  double flops_per_iteration() const;

  /// The runner of --cuda-graph-impl (its graphs, capture report and memory figures).
  const IterationRunner& runner() const { return *runner_; }
  /// Drops every graph (their pools return to the allocator); the next iterations capture again.
  void delete_cuda_graphs();

 private:
  /// Under tensor parallelism: the parameters whole on every rank (counted once in the gradient norm), and
  /// those of them whose gradient is each rank's share, summed over the tensor group after the backward (the
  /// q/k norms; every one under --sequence-parallel). Both empty without tensor parallelism.
  struct TensorParameters {
    std::vector<at::Tensor> duplicates, summed;
  };
  TensorParameters tensor_parameters();
  /// How this rank's parameters are parts of the whole ones, which checkpoints hold: the joins that make them
  /// whole, in order (over the expert group, each rank's share of the experts; then over the tensor group, each
  /// rank's part of every split tensor, the experts' parts included). None where this rank's parameters are whole
  /// (one process, data or pipeline parallelism).
  GroupJoins joins_to_whole() const;
  /// This rank's microbatches of global batch `index` of the split (its data-parallel shard).
  std::vector<Batch> host_batches(Split split, int64_t index) const;
  struct Interval;
  void log_interval(Progress& progress, Interval& interval, int64_t done, TrainSummary& summary);
  /// Whether to stop after this iteration: this process's request, agreed by every rank (at log lines).
  bool agree_to_stop(bool requested_here, bool at_log_line);
  /// Whether --save and --save-interval (or the last iteration) ask for a checkpoint after `done`.
  bool save_due(int64_t done) const;
  void save_and_report(Progress& progress, int64_t done, TrainSummary& summary);
  void evaluate_and_sample(Progress& progress, int64_t done, TrainSummary& summary);
  void write_metrics(const nlohmann::json& record);
  void report_capture(Progress& progress, int64_t iteration);
  /// AdamW over this rank's parameters (the experts last), sharded with --use-distributed-optimizer; `fused`: with
  /// the working copies the fused path reads.
  void make_optimizer(std::vector<std::pair<std::string, at::Tensor>> parameters, int64_t expert_parameters,
                      const at::Tensor& shared_embedding, bool fused);
  /// The gradients' sync over the data-parallel ranks (or none for one process), after make_optimizer and the fused
  /// path.
  void make_sync(const at::Tensor& shared_embedding, int64_t expert_parameters);
  /// With --overlap-param-gather, gathers the last step's weights now (before anything but training reads them).
  void complete_parameter_gathers();
  /// The model's parameters by name (a released one has no values of its own).
  std::vector<std::pair<std::string, at::Tensor>> model_parameters() const;
  /// Whether each rank writes its own shards of the Adam moments (the distributed optimizer where every rank's
  /// parameters are whole: data and pipeline parallelism), rank 0 the rest.
  bool saves_moments_per_rank() const;
  std::string save_moments_per_rank(int64_t iterations, const std::string& runs_folder);
  /// Where the ranks write their moment runs for the checkpoint of `iterations`, until rank 0 moves it in (named with
  /// rank 0's process id: a collective).
  std::string shards_folder(int64_t iterations);
  /// Whether every rank sees the folder rank 0 makes at `folder` (a file system they share); removed when not.
  bool every_rank_sees(const std::string& folder);
  /// The state joined to rank 0 (over the pipeline, expert and tensor groups) and written there, with the folder of the
  /// ranks' moment runs moved in where there is one.
  std::string write_joined(int64_t iterations, NamedTensorList parameters, NamedTensorList state,
                           const std::string& optimizer_shards);
  /// Throws on every rank when any rank's `failure` is set (its own message where it has one; `what` the others').
  void agree_on(const std::optional<std::string>& failure, const std::string& what);
  /// load()'s reads into `parameters` and `state` (whole tensors, or this rank's parts of them, joined as the layout
  /// needs), the moments from the ranks' runs where the checkpoint (`folder`) keeps them so (`stored`): whole, or with
  /// `own_runs` only this rank's shards, straight into the live state. Returns the checkpoint's iteration.
  int64_t read_state(const std::string& dir, const std::string& folder, const NamedTensorList& parameters,
                     const NamedTensorList& state, bool stored, bool own_runs, OptionalState& carried);

  config::RunConfig config_;
  TokenDataset data_;
  at::Device device_;
  dist::ParallelLayout layout_;
  dist::ProcessGroups* groups_ = nullptr;  ///< this rank's groups (not owned); null for one process
  model::GptModel model_{nullptr};
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<GradientShards> shards_;  ///< the distributed optimizer's, or null
  bool gathers_deferred_ = false;           ///< --overlap-param-gather: the step leaves the gathers to the next forward
  bool weights_stale_ = false;              ///< a step left its gathers to the next forward, which has not run
  std::unique_ptr<GradientSync> sync_;
  std::unique_ptr<TrainingStep> step_;
  std::unique_ptr<IterationRunner> runner_;
  int64_t start_iteration_ = 0;
  /// Tensors the model's paths keep across steps (FP8 delayed scaling, "fp8.*"), saved beside the optimizer's.
  std::vector<std::pair<std::string, at::Tensor>> carried_state_;
  std::vector<std::string> state_not_in_checkpoint_;
  std::optional<std::ofstream> metrics_;
  std::optional<runtime::PeakThroughput> peak_;
  int64_t peak_memory_bytes_ = 0;  ///< the device's peak over the intervals reported so far
};

}  // namespace graphed::train
