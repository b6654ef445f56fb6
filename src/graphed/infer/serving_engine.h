// infer/serving_engine.h — the serving engine: requests join with their own sampling settings, stop
// ids and token limits, and leave as they finish, at every step (continuous batching over
// infer/scheduler.h); their keys and values live in a paged cache (infer/paged_cache.h) whose size is
// set after the step's working memory is set aside. Each step's batch dimensions are matched against
// Megatron's graph list (infer/batch_buckets.h): a matched step is padded to its bucket and runs as
// CUDA graphs (or eagerly, in scope none, over the same padded shapes and kernels, so the two agree
// bitwise); a step no bucket serves runs eagerly at its own size, prefill chunks through dense SDPA,
// and is counted. step() hands out each new token as it is drawn and each finished request with its
// reason. With async scheduling (the default, vLLM's --async-scheduling), step() schedules and launches the
// next step before it reads the tokens of the one in flight: the device always has a step queued, a decode
// token drawn by the step in flight is read by the next step on the device, and the host's work on step n
// overlaps the device's on step n - 1. A request that draws a stop token has one more token computed for it,
// which is dropped. Under tensor parallelism only the first rank schedules: its engine tells each step it launches
// to the others through the relay it was built with (infer/step_relay.h), and theirs launch the same step by
// follow(), without requests, never reading a drawn token.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graphed/capture/cuda_graph.h"
#include "graphed/config/cuda_graph_config.h"
#include "graphed/infer/batch_buckets.h"
#include "graphed/infer/block_pool.h"
#include "graphed/infer/paged_cache.h"
#include "graphed/infer/paged_step.h"
#include "graphed/infer/paged_step_runner.h"
#include "graphed/infer/request.h"
#include "graphed/infer/request_controls.h"
#include "graphed/infer/scheduler.h"
#include "graphed/infer/speculation.h"
#include "graphed/infer/step_inputs.h"
#include "graphed/infer/step_order.h"
#include "graphed/infer/step_relay.h"
#include "graphed/runtime/device.h"

namespace graphed::infer {

/// The engine's limits, by Megatron's names where it has them (the CLI maps them to its flags).
struct ServingOptions {
  config::InferenceCudaGraphScope scope = config::InferenceCudaGraphScope::kNone;
  int64_t max_requests = 8;   ///< inference_max_requests: requests in flight at once
  int64_t max_tokens = 8192;  ///< inference_dynamic_batching_max_tokens: tokens in one step
  int64_t max_sequence = 0;   ///< inference_max_seq_length: a request's prompt + new tokens; 0 = the model's context
  int64_t block_size = 256;   ///< inference_dynamic_batching_block_size: positions per cache block
  double buffer_size_gb = 0;  ///< inference_dynamic_batching_buffer_size_gb: KV cache memory; 0 = what fits
  /// The cache's blocks when the caller decided them (tensor-parallel ranks agree on the fewest that fit
  /// any of them, so that they schedule alike); 0 = from the buffer size.
  int64_t cache_blocks = 0;
  int64_t num_cuda_graphs = 16;          ///< inference_dynamic_batching_num_cuda_graphs (-1 = automatic)
  int64_t cuda_graph_max_tokens = 512;   ///< inference_cuda_graph_max_tokens
  int64_t mixed_prefill_count = 16;      ///< ..._cuda_graph_mixed_prefill_count (hybrid models: decode-only)
  bool decode_only_cuda_graphs = false;  ///< decode_only_cuda_graphs
  bool chunked_prefill = true;           ///< off: Megatron's --disable-chunked-prefill
  bool prefix_sharing = false;           ///< requests share the blocks of identical prompt prefixes (not for Mamba)
  bool async_scheduling = true;          ///< schedule and launch a step before the last one's tokens are read
  BucketDistribution distribution = BucketDistribution::kExponential;
  int64_t vocabulary = 0;  ///< draw only ids below it (the tokenizer's size); 0 = all
  /// Prompt ids must be below it; 0 = the model's vocabulary. A model padded for tensor parallelism gives
  /// its size before padding, so that its servers accept what one process accepts.
  int64_t prompt_vocabulary = 0;
  /// Speculative decoding (vLLM's --speculative-config): requests without logit controls, constraints or log
  /// probabilities propose tokens, and each step verifies them; not for Mamba-hybrid models or tensor parallelism.
  SpeculativeDecoding speculation;
};

/// The rows a step of the engine holds: one per request, and with speculation one per proposed token too (at most
/// the step's tokens).
int64_t step_rows(const ServingOptions& options);

/// A drawn token's log probability under the model's distribution (the logits before penalties, bias, masks and
/// temperature: vLLM's default, OpenAI's), and the likeliest tokens' (ids and log probabilities, likeliest first).
struct TokenLogprobs {
  double logprob = 0;
  std::vector<std::pair<int64_t, double>> top;
};

struct TokenEvent {
  int64_t request = 0;
  int64_t token = 0;
  std::optional<TokenLogprobs> logprobs;  ///< when the request asked for them (RequestOptions::logprobs)
};

struct FinishedRequest {
  int64_t request = 0;
  FinishReason reason = FinishReason::kLength;
  std::string message;          ///< why it was rejected (empty otherwise)
  std::vector<int64_t> tokens;  ///< the tokens it drew, the stop token included
};

/// One step() call on the host's clock, and the device's span of the step whose tokens it read.
struct StepTiming {
  double seconds = 0;         ///< the call: scheduling, launching, waiting for and handing out tokens
  double host_seconds = 0;    ///< of it, the host's own work (the rest is waiting for the device)
  double device_seconds = 0;  ///< the read step on the device, from its input copy to its tokens' copy
};

/// What a step() call read: the tokens and ends of one step (with async scheduling, the step launched by
/// the call before), and that step's shape.
struct StepResult {
  std::vector<TokenEvent> tokens;
  std::vector<FinishedRequest> finished;
  BatchDimensions real;    ///< what the step held (zero when no step was read)
  BatchDimensions padded;  ///< what it ran as
  bool matched = false;    ///< a graph bucket served it (replayed, or eager in scope none)
  StepTiming timing;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t graph_steps = 0;      ///< steps replayed from graphs
  int64_t eager_steps = 0;      ///< steps run eagerly (every step in scope none)
  int64_t unmatched_steps = 0;  ///< steps no bucket served (eager at their own size)
  int64_t preemptions = 0;
  int64_t prompt_tokens = 0;  ///< tokens run through the model as prompts (recomputed ones too)
  int64_t output_tokens = 0;
  int64_t shared_prompt_tokens = 0;  ///< prompt tokens taken from other requests' blocks (prefix sharing)
  int64_t peak_blocks = 0;
  double capture_seconds = 0;
  double step_seconds = 0;  ///< on the host's clock, from scheduling a step to handing out its tokens
  /// Of step_seconds, the host's own work: scheduling, building the inputs, launching, and after the drawn
  /// tokens arrive, moving the requests on (the rest is waiting for the device).
  double host_seconds = 0;
  /// The steps' span on the device: from queueing a step's input copy to the end of its last kernel (CUDA
  /// events; launch latency included). step_seconds beyond it is the time between steps when the device had
  /// nothing queued: waiting for the host to read the tokens, move the requests on and launch the next step.
  double device_seconds = 0;
  int64_t masked_steps = 0;  ///< steps with a request whose output follows a TokenConstraint
  double mask_seconds = 0;   ///< of host_seconds, computing those steps' token masks
  /// Speculative decoding: verifications (a request's proposed tokens checked in one step), the tokens proposed,
  /// and the tokens kept. Each verification also draws one token of the target's own.
  int64_t verifications = 0;
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
};

/// The features a step drawing for a request with `options` needs (the step's are its sampling rows' union).
SamplingFeatures features_of(const RequestOptions& options);

class ServingEngine {
 public:
  /// The model must be in eval mode on `device`; its parameter dtype is the cache's. `relay` (not owned; it
  /// outlives the engine) hears of every step the engine launches. Throws ConfigError for options out of range
  /// and when the cache does not fit the device.
  ServingEngine(model::GptModel model, const at::Device& device, ServingOptions options,
                StepRelay& relay = StepRelay::none());
  ~ServingEngine();
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;

  /// Queues a request and returns its id. A request the engine cannot serve (an empty prompt, a token id
  /// outside the vocabulary, a prompt and token limit past the context or the cache) is not queued: the
  /// next step() reports it finished as rejected, with the reason; the others go on.
  int64_t add_request(std::vector<int64_t> prompt, RequestOptions options);
  /// Ends a request now: its blocks go back, and the next step() reports it cancelled. Unknown or
  /// finished ids are ignored.
  void cancel(int64_t id);
  /// Launches one step (none when nothing can be scheduled) and reads the tokens of the step before it
  /// (async scheduling; without it, of this one), and reports what they did.
  StepResult step();
  /// Whether any request waits or runs, a step's tokens wait to be read, or a rejection or cancellation
  /// waits to be reported.
  bool has_work() const;
  /// A rank that does not schedule: launches the step a scheduling engine of the same model part and options
  /// announced (order.kind kStep), in its order: captures the key's graphs if the step replays them and they are
  /// missing, has `receive_inputs` write the step's packed inputs into the tensor it is given (the device buffer
  /// the step reads, on the step's stream), and runs it. The drawn tokens stay on the device, where the next
  /// step's tokens in flight are read from (drawn_tokens).
  void follow(const StepOrder& order, const std::function<void(at::Tensor&)>& receive_inputs);
  /// The device buffer the latest step drew its tokens into, one per request of its padded shape (the first
  /// `requests`). Ranks that follow one scheduler draw the same.
  at::Tensor drawn_tokens(int64_t requests) const { return inputs_.next_tokens_view(requests); }

  /// Captures every bucket's graphs in each of `modes` with `features`, largest bucket first; other modes and
  /// features are captured when first needed (a step that waits for it). A no-op in scope none.
  void capture_graphs(const std::vector<SamplingMode>& modes = {SamplingMode::kGreedy},
                      const SamplingFeatures& features = {});
  const std::vector<BatchDimensions>& buckets() const { return buckets_; }
  /// The most tokens a step holds (the graph buckets' largest where they hold prompt tokens).
  int64_t step_token_limit() const { return scheduler_.limits().max_tokens; }
  int64_t graph_count() const { return graph_runner_->graph_count(); }
  const EngineStats& stats() const { return stats_; }
  /// Speculation's measurements of its worth at the engine's load (infer/speculation_governor.h).
  const SpeculationGovernor& speculation_governor() const { return scheduler_.speculator().governor(); }
  int64_t blocks_in_use() const { return pool_.used_count(); }
  int64_t blocks_total() const { return pool_.usable(); }
  const ServingOptions& options() const { return options_; }
  int64_t cache_bytes() const { return cache_->bytes(); }
  const PagedCache& cache() const { return *cache_; }
  /// The most positions a request may hold (prompt and drawn tokens).
  int64_t max_sequence() const { return sizes_.max_sequence; }
  /// The cache blocks an engine of `model` on `device` with `options` would get (what fits, or
  /// options.cache_blocks). Throws ConfigError as the constructor does when fewer than 2 fit.
  static int64_t blocks_that_fit(model::GptModel& model, const at::Device& device, const ServingOptions& options);
  /// Why add_request would refuse this request, or nullopt when it would take it. Reads only what is
  /// fixed at construction, so any thread may ask while another steps the engine.
  std::optional<Rejection> rejection(const std::vector<int64_t>& prompt, const RequestOptions& options) const;

 private:
  /// The refusal of a prompt of `length` tokens asking for `new_tokens` more, past the context.
  std::optional<Rejection> context_rejection(int64_t length, int64_t new_tokens) const;
  /// The refusal of controls, log probabilities or a constraint out of range (or under tensor parallelism).
  std::optional<Rejection> controls_rejection(const RequestOptions& options) const;
  void ensure_captured(const StepKey& key);

  /// A row of a launched step: the request (by id: it may end before the row is read) and whether the row
  /// draws a token. A verification's first row holds its proposed tokens; the rows after it draw the tokens after
  /// each proposal, read with the first.
  struct LaunchedRow {
    int64_t request = 0;
    bool samples = false;
    std::vector<int64_t> proposals;
    bool proposal = false;  ///< it computes a proposed token
  };
  /// A step on the device whose drawn tokens the host has not read.
  struct LaunchedStep {
    std::vector<LaunchedRow> rows;
    BatchDimensions real, padded;
    bool matched = false;
    bool logprobs = false;  ///< its log probabilities come back with its tokens
    int64_t slot = 0;       ///< which of slots_ receives its tokens
  };
  /// Where a launched step's drawn tokens land: pinned host memory, the event after their copy, the step's
  /// device timer. Steps alternate between two.
  struct TokenSlot {
    TokenSlot(const at::Device& device, int64_t rows, int64_t top)
        : tokens(runtime::pinned_host_tensor({rows}, at::kLong, device)),
          logprobs(runtime::pinned_host_tensor({rows, 1 + top}, at::kFloat, device)),
          top_ids(runtime::pinned_host_tensor({rows, top}, at::kLong, device)),
          copied(device),
          timer(device) {}
    at::Tensor tokens;    // pinned [rows] int64
    at::Tensor logprobs;  // pinned [rows, 1 + top] float32
    at::Tensor top_ids;   // pinned [rows, top] int64
    runtime::StreamEvent copied;
    runtime::DeviceTimer timer;
  };

  /// Schedules and launches one step; false when nothing can be scheduled. A masked step reads the step before it
  /// into `result` while the device runs its model, and writes its masks from the constraints thus moved on.
  bool launch_step(StepResult& result);
  /// The masks of a launched step's rows (all ones but for constrained requests' draws), copied to the device.
  void write_masks(const LaunchedStep& step, int64_t requests);
  /// Moves a request on by a token it drew (read from `slot`'s row `row`), into `result`; false when that ended it.
  bool take_token(Request& request, int64_t token, const LaunchedStep& step, std::size_t row, StepResult& result);
  /// Moves a request on by a verification starting at row `row` of `drawn`: the proposals kept and the token drawn
  /// after them; the cache positions of the others are given back to be written again.
  void take_verified(Request& request, const LaunchedStep& step, std::size_t row, const int64_t* drawn,
                     StepResult& result);
  /// What a scheduled step is to a rank that does not schedule; sets `step`'s shapes.
  StepOrder order_step(const Schedule& schedule, LaunchedStep& step) const;
  /// Before a launch runs: the step's rows, the requests' tokens in flight and the counters.
  void note_launch(const Schedule& schedule, LaunchedStep& step);
  /// Counts a launched (or followed) step by how it ran.
  void count_step(const StepOrder& order);
  /// Waits for the oldest launched step's tokens and moves its requests on by them, into `result`.
  void read_oldest(StepResult& result);
  void finish(Request& request, FinishReason reason, StepResult& result);

  /// What the options and the device's memory come to.
  struct Sizes {
    int64_t max_sequence = 0;  ///< positions per request
    int64_t table_width = 0;   ///< blocks per request
    int64_t blocks = 0;        ///< cache blocks, the padding block included
  };
  static Sizes size_engine(model::GptModel& model, const at::Device& device, const ServingOptions& options);

  at::Device device_;
  model::GptModel model_;
  ServingOptions options_;
  StepRelay& relay_;  // not owned; outlives the engine
  Sizes sizes_;
  std::unique_ptr<PagedCache> cache_;
  BlockPool pool_;
  std::vector<BatchDimensions> buckets_;
  Scheduler scheduler_;
  StepInputs inputs_;
  PagedStep paged_step_;
  std::unique_ptr<PagedStepRunner> graph_runner_;
  std::unique_ptr<PagedStepRunner> eager_runner_;
  std::map<int64_t, std::unique_ptr<Request>> requests_;
  std::vector<FinishedRequest> pending_reports_;  // rejections and cancellations for the next step()
  int64_t next_id_ = 1;
  std::vector<std::unique_ptr<TokenSlot>> slots_;
  RequestControls controls_;
  std::deque<LaunchedStep> launched_;  // oldest first; at most two during a step() call
  int64_t launches_ = 0;
  double waited_seconds_ = 0;  // of the current step() call, waiting for the device
  EngineStats stats_;
  std::optional<capture::SideStream> stream_;
};

}  // namespace graphed::infer
