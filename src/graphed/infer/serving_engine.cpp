// infer/serving_engine.cpp — see infer/serving_engine.h.
#include "graphed/infer/serving_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <ATen/core/grad_mode.h>

#include "graphed/runtime/device.h"
#include "graphed/util/error.h"

namespace graphed::infer {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kGigabyte = 1024.0 * 1024.0 * 1024.0;
constexpr double kMegatronBufferGigabytes = 40.0;  // Megatron's default buffer size

at::TensorOptions model_options(model::GptModel& model, const at::Device& device) {
  return at::TensorOptions().dtype(model->parameters().at(0).scalar_type()).device(device);
}

/// The tokens a step may draw: the tokenizer's where it is smaller than the model's vocabulary.
int64_t drawable_vocabulary(const ServingOptions& options, const config::ModelConfig& config) {
  return options.vocabulary > 0 ? std::min(options.vocabulary, config.vocab_size) : config.vocab_size;
}

int64_t model_context(const config::ModelConfig& config) {
  return std::max(config.seq_length, config.max_position_embeddings.value_or(config.seq_length));
}

ServingOptions checked(ServingOptions options, model::GptModel& model) {
  const int64_t context = model_context(model->config());
  if (options.max_sequence == 0) options.max_sequence = context;
  GRAPHED_CHECK(options.max_requests >= 1, ConfigError, "the engine takes ", options.max_requests,
                " requests at once (inference max requests); fix: give at least 1");
  GRAPHED_CHECK(options.max_tokens >= options.max_requests, ConfigError, "a step holds ", options.max_tokens,
                " tokens (inference max tokens), fewer than the ", options.max_requests,
                " requests it may decode; fix: give at least ", options.max_requests);
  GRAPHED_CHECK(options.max_sequence >= 2 && options.max_sequence <= context, ConfigError, "a request may hold ",
                options.max_sequence,
                " positions (inference max sequence length), and the model's "
                "context is ",
                context, "; fix: give 2 to ", context);
  GRAPHED_CHECK(options.block_size >= 1 && options.block_size <= 4096, ConfigError, "a KV cache block holds ",
                options.block_size, " positions (block size); fix: give 1 to 4096 (Megatron uses 256)");
  GRAPHED_CHECK(options.buffer_size_gb >= 0, ConfigError, "the KV cache buffer is ", options.buffer_size_gb,
                " GB; fix: give a positive size, or 0 for what fits");
  GRAPHED_CHECK(options.num_cuda_graphs == -1 || options.num_cuda_graphs >= 1, ConfigError, "the number of graphs is ",
                options.num_cuda_graphs, "; fix: give a positive number, or -1 (automatic)");
  GRAPHED_CHECK(options.cuda_graph_max_tokens >= 1, ConfigError, "the largest graphed step is ",
                options.cuda_graph_max_tokens, " tokens; fix: give at least 1");
  GRAPHED_CHECK(!model->layers().empty(), ConfigError, "the model has no layers; fix: load a model with at least one");
  const config::ModelConfig& model_config = model->config();
  GRAPHED_CHECK(options.scope == config::InferenceCudaGraphScope::kNone || !model_config.is_moe() ||
                    model_config.has_static_moe_shapes(),
                ConfigError,
                "the model's dropless MoE layers read their per-expert token counts on the host, "
                "which a serving graph cannot capture; fix: build the model with the grouped GEMM (ModelConfig "
                "moe_grouped_gemm: the experts read their counts on the device; graphed's CLI does so for every "
                "dropless MoE it decodes), or serve it with inference graph scope none");
  const SpeculativeDecoding& speculation = options.speculation;
  GRAPHED_CHECK(!speculation.enabled() || !model_config.has_mamba_layers(), ConfigError,
                "speculative decoding gives back the cache positions of refused tokens, and this model's Mamba layers "
                "keep one state per request that cannot be taken back; fix: serve a hybrid model without speculation");
  GRAPHED_CHECK(
      !speculation.enabled() || (speculation.num_tokens >= 1 && speculation.num_tokens <= kMaxSpeculativeTokens),
      ConfigError, "speculation proposes ", speculation.num_tokens, " tokens a step; fix: give 1 to ",
      kMaxSpeculativeTokens);
  using Method = SpeculativeDecoding::Method;
  GRAPHED_CHECK(speculation.method != Method::kNgram ||
                    (speculation.lookup.shortest >= 1 && speculation.lookup.longest >= speculation.lookup.shortest),
                ConfigError, "prompt lookup looks up n-grams of ", speculation.lookup.shortest, " to ",
                speculation.lookup.longest, " tokens; fix: give a shortest of at least 1 and a longest no shorter");
  GRAPHED_INTERNAL_ASSERT(speculation.method != Method::kDraftModel || speculation.draft != nullptr,
                          "a draft model's speculation without its proposer");
  GRAPHED_CHECK(!options.prefix_sharing || !model->config().has_mamba_layers(), ConfigError,
                "prefix sharing keeps keys and values per block, and this model's Mamba layers keep one state per "
                "request; fix: turn prefix sharing off for a hybrid model");
  return options;
}

/// Bytes one step at the token limit may take beyond the weights and the cache (activations, logits,
/// sampling, graph pools), generously: the cache gets what is left.
int64_t step_working_bytes(const config::ModelConfig& config, const ServingOptions& options, int64_t element) {
  const int64_t hidden = config.hidden_size;
  const int64_t ffn = config.ffn_hidden_size.value_or(4 * hidden);
  const int64_t per_token = (12 * hidden + 4 * ffn) * element;
  const int64_t logits = step_rows(options) * config.vocab_size * 40;  // fp32 logits, sorts, float64 noise
  // The logit control tables (bias, counts, prompt tokens), made when a request first asks for controls.
  const int64_t tables = (step_rows(options) + 2) * config.vocab_size * 9;
  return 2 * (options.max_tokens * per_token + logits) + tables + (int64_t{256} << 20);
}

BucketLimits bucket_limits(const ServingOptions& options, int64_t max_sequence, bool hybrid) {
  BucketLimits limits;
  limits.max_requests = step_rows(options);
  limits.max_tokens = options.max_tokens;
  limits.max_sequence_length = max_sequence;
  // Megatron sizes the graph token limit from the request limit; never below it (rule RT-14).
  limits.cuda_graph_max_tokens =
      std::min(options.max_tokens, std::max(options.cuda_graph_max_tokens, limits.max_requests));
  // Hybrid models' Mamba layers run prefill per request on the host: their graphs are decode-only.
  if (!options.decode_only_cuda_graphs && !hybrid) limits.mixed_prefill_count = options.mixed_prefill_count;
  limits.use_non_decode_graphs = !options.decode_only_cuda_graphs && !hybrid;
  limits.distribution = options.distribution;
  return limits;
}

/// The engine's buckets. With speculation, the buckets of the engine without it (so that a step without proposals
/// pads to what it would without speculation) and those up to the verification rows, in Megatron's order: prefill
/// tokens, then decode requests, descending.
std::vector<BatchDimensions> engine_buckets(const ServingOptions& options, int64_t max_sequence, bool hybrid) {
  std::vector<BatchDimensions> buckets =
      generate_buckets(options.num_cuda_graphs, bucket_limits(options, max_sequence, hybrid));
  if (!options.speculation.enabled()) return buckets;
  ServingOptions plain = options;
  plain.speculation = SpeculativeDecoding{};
  for (const BatchDimensions& bucket :
       generate_buckets(options.num_cuda_graphs, bucket_limits(plain, max_sequence, hybrid))) {
    if (std::find(buckets.begin(), buckets.end(), bucket) == buckets.end()) buckets.push_back(bucket);
  }
  std::stable_sort(buckets.begin(), buckets.end(), [](const BatchDimensions& a, const BatchDimensions& b) {
    return std::make_tuple(a.token_count - a.decode_count, a.decode_count) >
           std::make_tuple(b.token_count - b.decode_count, b.decode_count);
  });
  return buckets;
}

/// The most tokens one step holds. Where the buckets hold prompt tokens, the largest bucket's: every step the
/// scheduler forms then has a bucket (a step of at most that many tokens and at most max requests matches one,
/// batch_buckets.h), so no step runs eagerly for its size. In every scope alike, so that scope none computes
/// the steps the graphs do. Otherwise (decode-only graphs, none, or no chunked prefill, where a prompt runs whole)
/// the token limit.
int64_t steps_token_limit(const ServingOptions& options, const std::vector<BatchDimensions>& buckets) {
  if (!options.chunked_prefill) return options.max_tokens;
  int64_t largest_mixed = 0;
  for (const auto& bucket : buckets) {
    if (bucket.prefill_count > 0) largest_mixed = std::max(largest_mixed, bucket.token_count);
  }
  return largest_mixed > 0 ? std::min(options.max_tokens, largest_mixed) : options.max_tokens;
}

}  // namespace

int64_t step_rows(const ServingOptions& options) {
  return std::min(options.max_tokens, options.max_requests * (1 + options.speculation.tokens()));
}

ServingEngine::Sizes ServingEngine::size_engine(model::GptModel& model, const at::Device& device,
                                                const ServingOptions& options) {
  Sizes sizes;
  sizes.max_sequence = options.max_sequence;
  sizes.table_width = blocks_for(options.max_sequence, options.block_size);
  const auto tensor_options = model_options(model, device);
  const int64_t per_block = bytes_per_block(model, options.block_size, tensor_options);
  // More than every request's whole context would never be used.
  const int64_t enough = options.max_requests * sizes.table_width + 1;
  if (per_block == 0) {  // no attention layer (all Mamba): blocks only count positions
    sizes.blocks = enough;
    return sizes;
  }
  if (options.cache_blocks > 0) {
    sizes.blocks = std::min(enough, options.cache_blocks);
    return sizes;
  }
  int64_t budget = static_cast<int64_t>(options.buffer_size_gb * kGigabyte);
  if (options.buffer_size_gb == 0) {
    const int64_t element = static_cast<int64_t>(tensor_options.dtype().itemsize());
    const int64_t states = state_bytes(model, options.max_requests + 1, tensor_options);
    const int64_t available = runtime::available_memory_bytes(device).value_or(0);
    const int64_t working = step_working_bytes(model->config(), options, element);
    budget = std::min<int64_t>(static_cast<int64_t>(0.9 * static_cast<double>(available - working - states)),
                               static_cast<int64_t>(kMegatronBufferGigabytes * kGigabyte));
  }
  sizes.blocks = std::min(enough, budget / per_block);
  GRAPHED_CHECK(sizes.blocks >= 2, ConfigError, "the KV cache gets ", budget / (1 << 20), " MiB, room for ",
                std::max<int64_t>(sizes.blocks, 0), " blocks of ", options.block_size,
                " positions, and it needs at least 2; fix: free device memory, give a larger buffer size, or "
                "smaller blocks");
  return sizes;
}

int64_t ServingEngine::blocks_that_fit(model::GptModel& model, const at::Device& device,
                                       const ServingOptions& options) {
  return size_engine(model, device, checked(options, model)).blocks;
}

ServingEngine::ServingEngine(model::GptModel model, const at::Device& device, ServingOptions options, StepRelay& relay)
    : device_(device),
      model_(std::move(model)),
      options_(checked(std::move(options), model_)),
      relay_(relay),
      sizes_(size_engine(model_, device_, options_)),
      cache_(std::make_unique<PagedCache>(model_, sizes_.blocks, options_.block_size, options_.max_requests + 1,
                                          model_options(model_, device_))),
      pool_(sizes_.blocks),
      buckets_(engine_buckets(options_, sizes_.max_sequence, model_->config().has_mamba_layers())),
      scheduler_(SchedulerLimits{options_.max_requests, steps_token_limit(options_, buckets_), options_.block_size,
                                 options_.chunked_prefill, options_.prefix_sharing, step_rows(options_)},
                 pool_, Speculator(options_.speculation)),
      inputs_(options_.max_tokens, step_rows(options_), sizes_.table_width, model_->config().hidden_size,
              model_options(model_, device_), drawable_vocabulary(options_, model_->config())),
      paged_step_(model_, *cache_, options_.vocabulary),
      controls_(device_, options_.max_requests) {
  GRAPHED_CHECK(!options_.speculation.enabled() || &relay_ == &StepRelay::none(), ConfigError,
                "speculative decoding is not built for tensor-parallel serving yet; fix: serve with one process, or "
                "without speculation");
  graph_runner_ = make_paged_step_runner(options_.scope, paged_step_, device_);
  eager_runner_ = make_paged_step_runner(config::InferenceCudaGraphScope::kNone, paged_step_, device_);
  for (int slot = 0; slot < 2; ++slot) {
    slots_.push_back(std::make_unique<TokenSlot>(device_, step_rows(options_), inputs_.top_count()));
  }
  if (device_.is_cuda()) stream_.emplace(device_);
}

ServingEngine::~ServingEngine() {
  if (!launched_.empty()) runtime::synchronize(device_);  // no graph is dropped while it runs
  if (graph_runner_) graph_runner_->release();
}

std::optional<Rejection> ServingEngine::rejection(const std::vector<int64_t>& prompt,
                                                  const RequestOptions& options) const {
  const auto length = static_cast<int64_t>(prompt.size());
  const auto count = [](int64_t value) { return std::to_string(value); };
  if (prompt.empty()) return Rejection{"the prompt is empty", "give at least one token", RejectedPart::kPrompt};
  if (options.max_new_tokens < 1) {
    return Rejection{"max new tokens is " + count(options.max_new_tokens), "ask for at least 1",
                     RejectedPart::kMaxNewTokens};
  }
  const int64_t vocab = options_.prompt_vocabulary > 0 ? options_.prompt_vocabulary : model_->config().vocab_size;
  for (const int64_t id : prompt) {
    if (id < 0 || id >= vocab) {
      return Rejection{"the prompt holds token id " + count(id) + ", outside the model's vocabulary of " +
                           count(vocab) + " (ids 0 to " + count(vocab - 1) + ")",
                       "encode it with the model's tokenizer", RejectedPart::kPrompt};
    }
  }
  if (auto too_long = context_rejection(length, options.max_new_tokens)) return too_long;
  const int64_t needed = length + options.max_new_tokens;
  if (blocks_for(needed, options_.block_size) > pool_.usable()) {
    return Rejection{"the request needs " + count(blocks_for(needed, options_.block_size)) + " cache blocks of " +
                         count(options_.block_size) + " positions, and the cache has " + count(pool_.usable()),
                     "ask for fewer tokens or give the cache more memory", RejectedPart::kCache};
  }
  const int64_t step_tokens = scheduler_.limits().max_tokens;
  if (!options_.chunked_prefill && needed - 1 > step_tokens) {
    // Without chunks a prompt runs in one step, and so does its recompute (prompt and drawn tokens) after
    // a preemption.
    return Rejection{"the prompt has " + count(length) + " tokens, and with " + count(options.max_new_tokens) +
                         " new tokens a recompute after preemption may need " + count(needed - 1) +
                         " tokens in one step, more than the step's " + count(step_tokens) +
                         " with chunked prefill off",
                     "turn chunked prefill on, or allow more tokens per step", RejectedPart::kStepTokens};
  }
  if (options.sampling.temperature < 0 || options.sampling.top_k < 0 || !(options.sampling.top_p > 0.0) ||
      options.sampling.top_p > 1.0 || !(options.sampling.min_p >= 0.0 && options.sampling.min_p <= 1.0)) {
    return Rejection{"the sampling settings are out of range",
                     "give temperature >= 0, top-k >= 0, top-p in (0, 1], min-p in [0, 1]", RejectedPart::kSampling};
  }
  return controls_rejection(options);
}

std::optional<Rejection> ServingEngine::controls_rejection(const RequestOptions& options) const {
  const LogitControls& controls = options.controls;
  const auto sampling = [](std::string problem, std::string remedy) {
    return Rejection{std::move(problem), std::move(remedy), RejectedPart::kSampling};
  };
  const auto in_penalty_range = [](double value) { return value >= -2.0 && value <= 2.0; };
  if (!in_penalty_range(controls.presence_penalty) || !in_penalty_range(controls.frequency_penalty) ||
      !(controls.repetition_penalty > 0.0) || !std::isfinite(controls.repetition_penalty)) {
    return sampling("a penalty is out of range (presence " + std::to_string(controls.presence_penalty) +
                        ", frequency " + std::to_string(controls.frequency_penalty) + ", repetition " +
                        std::to_string(controls.repetition_penalty) + ")",
                    "give presence and frequency penalties in [-2, 2] and a repetition penalty above 0");
  }
  const int64_t vocabulary = drawable_vocabulary(options_, model_->config());
  for (const auto& [token, bias] : controls.logit_bias) {
    if (token < 0 || token >= vocabulary || !(bias >= -100.0 && bias <= 100.0)) {
      return sampling("the logit bias of token " + std::to_string(token) + " is " + std::to_string(bias),
                      "bias tokens of the vocabulary (ids 0 to " + std::to_string(vocabulary - 1) + ") by -100 to 100");
    }
  }
  if (controls.min_tokens < 0 || controls.min_tokens > options.max_new_tokens) {
    return sampling("min tokens is " + std::to_string(controls.min_tokens) + " with at most " +
                        std::to_string(options.max_new_tokens) + " new tokens",
                    "give min tokens from 0 to the new-token limit");
  }
  if (options.logprobs < -1 || options.logprobs > kMaxTopLogprobs) {
    return sampling("the request asks for " + std::to_string(options.logprobs) + " top log probabilities",
                    "ask for 0 to " + std::to_string(kMaxTopLogprobs));
  }
  const bool follows = &relay_ != &StepRelay::none();
  if (follows && (controls.any() || options.constraint)) {
    return sampling(
        "penalties, logit bias, min tokens and structured output are not served with tensor "
        "parallelism yet (their per-request state lives on one rank)",
        "serve the model on one GPU for these, or leave them out");
  }
  return std::nullopt;
}

std::optional<Rejection> ServingEngine::context_rejection(int64_t length, int64_t new_tokens) const {
  const int64_t context = sizes_.max_sequence;
  if (length + new_tokens <= context) return std::nullopt;
  const auto tokens = [](int64_t count, const char* kind) {
    return std::to_string(count) + " " + kind + (count == 1 ? "token" : "tokens");
  };
  if (length >= context) {  // the prompt alone leaves no room for a new token
    return Rejection{"the prompt has " + tokens(length, "") + ", and the context holds " + std::to_string(context) +
                         " positions, the prompt's and the new tokens'",
                     "shorten the prompt to at most " + tokens(context - 1, ""), RejectedPart::kPrompt};
  }
  std::string remedy = "ask for at most " + tokens(context - length, "new ");
  if (context - new_tokens >= 1) remedy += ", or shorten the prompt to at most " + tokens(context - new_tokens, "");
  return Rejection{"the prompt has " + tokens(length, "") + ", and with " + tokens(new_tokens, "new ") + " that is " +
                       std::to_string(length + new_tokens) + " positions, past the context of " +
                       std::to_string(context),
                   remedy, RejectedPart::kMaxNewTokens};
}

int64_t ServingEngine::add_request(std::vector<int64_t> prompt, RequestOptions options) {
  const int64_t id = next_id_++;
  if (auto refused = rejection(prompt, options)) {
    pending_reports_.push_back({id, FinishReason::kRejected, refused->message(), {}});
    return id;
  }
  // A prompt is reused only from a running request of the same prompt, on one rank, without Mamba states.
  const auto source = requests_.find(options.prompt_of);
  if (source == requests_.end() || source->second->prompt_length != static_cast<int64_t>(prompt.size()) ||
      !std::equal(prompt.begin(), prompt.end(), source->second->tokens.begin()) ||
      model_->config().has_mamba_layers() || &relay_ != &StepRelay::none()) {
    options.prompt_of = 0;
  }
  auto request = std::make_unique<Request>();
  request->id = id;
  request->prompt_length = static_cast<int64_t>(prompt.size());
  request->tokens = std::move(prompt);
  request->options = std::move(options);
  const SamplingFeatures features = features_of(request->options);
  request->speculation.allowed =
      options_.speculation.enabled() && !features.logprobs && !features.controlled && !features.masked;
  scheduler_.add(request.get());
  requests_.emplace(id, std::move(request));
  return id;
}

void ServingEngine::cancel(int64_t id) {
  const auto found = requests_.find(id);
  if (found == requests_.end()) return;
  Request& request = *found->second;
  scheduler_.remove(&request);
  controls_.release(request);
  std::vector<int64_t> drawn(request.tokens.begin() + request.prompt_length, request.tokens.end());
  pending_reports_.push_back({id, FinishReason::kCancelled, "", std::move(drawn)});
  requests_.erase(found);
}

bool ServingEngine::has_work() const { return !scheduler_.idle() || !pending_reports_.empty() || !launched_.empty(); }

void ServingEngine::ensure_captured(const StepKey& key) {
  if (graph_runner_->has(key)) return;
  const auto start = Clock::now();
  const Schedule padding_only;  // a step of padding alone may run twice (warmup, capture) harmlessly
  const int64_t requests = key.dimensions.request_count();
  const int64_t tokens = key.dimensions.token_count;
  inputs_.load(padding_only, tokens, requests, options_.block_size);
  StepViews views =
      inputs_.views(plan_views(padding_only, tokens, requests, true, sizes_.max_sequence), tokens, requests, true);
  views.mode = key.mode;
  views.features = key.features;
  // The warmup draws into the drawn tokens' buffer, which the next step may still read (async scheduling).
  const at::Tensor drawn = views.previous_tokens.clone();
  graph_runner_->capture(key, views);
  views.previous_tokens.copy_(drawn);
  runtime::synchronize(device_);
  stats_.capture_seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

SamplingFeatures features_of(const RequestOptions& options) {
  return {options.logprobs >= 0, options.controls.any() || options.sampling.min_p > 0.0, options.constraint != nullptr};
}

void ServingEngine::capture_graphs(const std::vector<SamplingMode>& modes, const SamplingFeatures& features) {
  if (options_.scope == config::InferenceCudaGraphScope::kNone) return;
  if (features.controlled) inputs_.logit_tables();
  at::NoGradGuard no_grad;
  std::optional<capture::SideStream::Use> use;
  if (stream_) use.emplace(*stream_);
  std::vector<BatchDimensions> largest_first = buckets_;
  std::sort(largest_first.begin(), largest_first.end(), [](const auto& a, const auto& b) { return b < a; });
  for (const SamplingMode mode : modes) {
    for (const auto& dimensions : largest_first) ensure_captured({dimensions, mode, features});
  }
}

void ServingEngine::finish(Request& request, FinishReason reason, StepResult& result) {
  scheduler_.remove(&request);
  controls_.release(request);
  std::vector<int64_t> drawn(request.tokens.begin() + request.prompt_length, request.tokens.end());
  result.finished.push_back({request.id, reason, "", std::move(drawn)});
  requests_.erase(request.id);
}

StepResult ServingEngine::step() {
  const auto started = Clock::now();
  at::NoGradGuard no_grad;
  std::optional<capture::SideStream::Use> use;
  if (stream_) use.emplace(*stream_);
  StepResult result;
  const bool launched = launch_step(result);
  // Async: the step just launched stays on the device while the host reads the one before it.
  const std::size_t keep = options_.async_scheduling && launched ? 1 : 0;
  while (launched_.size() > keep) read_oldest(result);
  // Rejections and cancellations are handed out once the step ran, so a step that throws loses none.
  result.finished.insert(result.finished.begin(), pending_reports_.begin(), pending_reports_.end());
  pending_reports_.clear();
  result.timing.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  result.timing.host_seconds = result.timing.seconds - waited_seconds_;
  waited_seconds_ = 0;
  stats_.step_seconds += result.timing.seconds;
  stats_.host_seconds += result.timing.host_seconds;
  // Speculation's governor compares decode steps: a step computing prompt tokens draws few for its time.
  scheduler_.record_step(result.timing.seconds, static_cast<int64_t>(result.tokens.size()),
                         result.real.prefill_count == 0);
  return result;
}

bool ServingEngine::launch_step(StepResult& result) {
  const Schedule schedule = scheduler_.next();
  stats_.preemptions += static_cast<int64_t>(schedule.preempted.size());
  for (const int64_t id : schedule.preempted) {
    if (const auto found = requests_.find(id); found != requests_.end()) controls_.release(*found->second);
  }
  for (const auto& [from, to] : schedule.block_copies) cache_->copy_block(from, to);
  if (schedule.chunks.empty()) return false;
  LaunchedStep step;
  const StepOrder order = order_step(schedule, step);
  // The ranks that follow take the same steps in the same order: capture and run hold the model's collectives.
  relay_.announce(order);
  if (order.key.features.controlled) controls_.prepare(schedule, inputs_);
  if (order.graphed) ensure_captured(order.key);
  const int64_t tokens = step.padded.token_count;
  const int64_t requests = step.padded.request_count();
  const auto rows = static_cast<int64_t>(schedule.chunks.size());
  step.slot = launches_++ % 2;
  TokenSlot& slot = *slots_[static_cast<std::size_t>(step.slot)];
  slot.timer.start();
  inputs_.load(schedule, tokens, requests, options_.block_size);
  at::Tensor packed = inputs_.packed_inputs(tokens, requests);
  relay_.share_inputs(packed);
  StepViews views = inputs_.views(order.plan, tokens, requests, order.matched);
  views.mode = order.key.mode;
  views.features = order.key.features;
  // Rows first: a masked step reads the step before it mid-run, which may end requests of this one.
  note_launch(schedule, step);
  std::function<void()> before_sampling;
  if (order.key.features.masked) {
    before_sampling = [&] {
      while (!launched_.empty()) read_oldest(result);
      write_masks(step, requests);
    };
  }
  (order.graphed ? *graph_runner_ : *eager_runner_).run(order.key, views, before_sampling);
  slot.tokens.narrow(0, 0, rows).copy_(inputs_.next_tokens_view(rows), /*non_blocking=*/true);
  if (step.logprobs) {
    slot.logprobs.narrow(0, 0, rows).copy_(inputs_.logprobs_view(rows), /*non_blocking=*/true);
    slot.top_ids.narrow(0, 0, rows).copy_(inputs_.top_ids_view(rows), /*non_blocking=*/true);
  }
  slot.timer.stop();
  slot.copied.record();
  count_step(order);
  launched_.push_back(std::move(step));
  return true;
}

void ServingEngine::write_masks(const LaunchedStep& step, int64_t requests) {
  const auto start = Clock::now();
  std::vector<TokenConstraint*> constraints(static_cast<std::size_t>(requests), nullptr);
  for (std::size_t row = 0; row < step.rows.size(); ++row) {
    if (!step.rows[row].samples) continue;
    const auto found = requests_.find(step.rows[row].request);
    if (found != requests_.end()) constraints[row] = found->second->options.constraint.get();
  }
  controls_.write_masks(constraints, inputs_);
  ++stats_.masked_steps;
  stats_.mask_seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

StepOrder ServingEngine::order_step(const Schedule& schedule, LaunchedStep& step) const {
  step.real = {schedule.token_count(), schedule.prefill_count(), schedule.decode_count()};
  const auto match = match_bucket(step.real, buckets_, model_->config().has_mamba_layers());
  step.matched = match.has_value();
  step.padded = match.value_or(step.real);
  StepOrder order;
  order.key = {step.padded, SamplingMode::kGreedy};
  for (const auto& chunk : schedule.chunks) {
    if (!chunk.samples) continue;
    const RequestOptions& options = chunk.request->options;
    order.key.mode = std::max(order.key.mode, sampling_mode_of(options.sampling));
    order.key.features |= features_of(options);
  }
  // A request's controls change its rows of the tables through its prompt's chunks too (slot 0 otherwise).
  for (const auto& chunk : schedule.chunks) order.key.features.controlled |= chunk.request->options.controls.any();
  step.logprobs = order.key.features.logprobs;
  order.matched = step.matched;
  order.graphed = step.matched && options_.scope != config::InferenceCudaGraphScope::kNone;
  order.plan =
      plan_views(schedule, step.padded.token_count, step.padded.request_count(), step.matched, sizes_.max_sequence);
  return order;
}

void ServingEngine::note_launch(const Schedule& schedule, LaunchedStep& step) {
  for (std::size_t row = 0; row < schedule.chunks.size(); ++row) {
    const ScheduledChunk& chunk = schedule.chunks[row];
    step.rows.push_back({chunk.request->id, chunk.samples, chunk.proposals, chunk.draft >= 0});
    // A prompt's last token alone (after chunks, or a choice reusing another's prompt) runs as a decode token.
    if (!chunk.decode || chunk.first < chunk.request->prompt_length) stats_.prompt_tokens += chunk.length;
    if (!chunk.proposals.empty()) chunk.request->speculation.verifying = true;
    if (!chunk.samples) continue;
    ++chunk.request->in_flight;
    chunk.request->in_flight_row = static_cast<int64_t>(row);
  }
  stats_.peak_blocks = std::max(stats_.peak_blocks, pool_.peak_used());
  stats_.shared_prompt_tokens = scheduler_.shared_tokens();
}

void ServingEngine::count_step(const StepOrder& order) {
  ++stats_.steps;
  ++(order.graphed ? stats_.graph_steps : stats_.eager_steps);
  if (!order.matched) ++stats_.unmatched_steps;
}

void ServingEngine::follow(const StepOrder& order, const std::function<void(at::Tensor&)>& receive_inputs) {
  GRAPHED_INTERNAL_ASSERT(order.kind == StepOrder::Kind::kStep, "an engine told to follow an order to stop");
  at::NoGradGuard no_grad;
  std::optional<capture::SideStream::Use> use;
  if (stream_) use.emplace(*stream_);
  // As the scheduling rank: capture (warmup and capture hold collectives), then the inputs, then the step.
  if (order.key.features.controlled) inputs_.logit_tables();  // min-p alone: every row neutral
  if (order.graphed) ensure_captured(order.key);
  const int64_t tokens = order.key.dimensions.token_count;
  const int64_t requests = order.key.dimensions.request_count();
  at::Tensor packed = inputs_.packed_inputs(tokens, requests);
  receive_inputs(packed);
  inputs_.set_block_size(options_.block_size);
  StepViews views = inputs_.views(order.plan, tokens, requests, order.matched);
  views.mode = order.key.mode;
  views.features = order.key.features;
  (order.graphed ? *graph_runner_ : *eager_runner_).run(order.key, views);
  count_step(order);
}

}  // namespace graphed::infer
