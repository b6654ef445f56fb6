// infer/decode_engine.cpp — see infer/decode_engine.h.
#include "graphed/infer/decode_engine.h"

#include <algorithm>
#include <array>
#include <chrono>

#include <ATen/core/grad_mode.h>

#include "graphed/infer/batch_buckets.h"
#include "graphed/runtime/device.h"
#include "graphed/util/error.h"

namespace graphed::infer {
namespace {

using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

at::TensorOptions model_options(model::GptModel model, const at::Device& device) {
  return at::TensorOptions().dtype(model->parameters().at(0).scalar_type()).device(device);
}

EngineOptions checked(EngineOptions options, model::GptModel model) {
  GRAPHED_CHECK(options.max_batch >= 1, ConfigError, "the decode batch is ", options.max_batch,
                " rows; fix: give at least 1");
  GRAPHED_CHECK(options.max_new_tokens >= 1, ConfigError, "the number of new tokens is ", options.max_new_tokens,
                "; fix: ask for at least 1");
  GRAPHED_CHECK(options.max_sequence >= 2, ConfigError, "the cache holds ", options.max_sequence,
                " positions per row; fix: give room for a prompt and a new token");
  GRAPHED_CHECK(options.num_cuda_graphs == -1 || options.num_cuda_graphs >= 1, ConfigError,
                "the number of decode graphs is ", options.num_cuda_graphs,
                "; fix: give a positive number, or -1 (automatic)");
  const int64_t graph_max = options.graph_max_batch.value_or(options.max_batch);
  GRAPHED_CHECK(graph_max >= 1 && graph_max <= options.max_batch, ConfigError, "the largest graphed batch is ",
                graph_max, ", and the cache has ", options.max_batch, " rows; fix: give 1 to ", options.max_batch);
  GRAPHED_CHECK(!model->layers().empty(), ConfigError, "the model has no layers; fix: load a model with at least one");
  return options;
}

}  // namespace

DecodeEngine::DecodeEngine(model::GptModel model, const at::Device& device, EngineOptions options)
    : device_(device),
      options_(checked(std::move(options), model)),
      decode_(model, options_.sampling),
      cache_(model->layers(), options_.max_batch, options_.max_sequence, model_options(model, device)) {
  row_sizes_ = decode_batch_sizes(options_.num_cuda_graphs, options_.graph_max_batch.value_or(options_.max_batch));
  if (options_.scope != config::InferenceCudaGraphScope::kNone) buckets_ = row_sizes_;
  runner_ = make_step_runner(options_.scope, decode_, device_);
  eager_ = make_step_runner(config::InferenceCudaGraphScope::kNone, decode_, device_);
  if (device_.is_cuda()) stream_.emplace(device_);
}

DecodeEngine::~DecodeEngine() { release_graphs(); }

std::pair<int64_t, bool> DecodeEngine::rows_for(int64_t batch) const {
  // Every scope pads to the same buckets, so that eager and graphed decoding run the same shapes.
  std::vector<BatchDimensions> dimensions;
  for (const int64_t rows : row_sizes_) dimensions.push_back({rows, 0, rows});
  // Megatron matches hybrid (Mamba) models strictly; with decode-only buckets both ways agree.
  const auto match = match_bucket({batch, 0, batch}, dimensions, decode_.config().has_mamba_layers());
  if (!match) return {batch, false};
  return {match->decode_count, !buckets_.empty()};
}

DecodeState& DecodeEngine::state_for(int64_t rows) {
  auto found = states_.find(rows);
  if (found != states_.end()) return found->second;
  model::GptModel model = decode_.model();
  DecodeState state = DecodeState::create(rows, cache_, options_.max_new_tokens, decode_.config().hidden_size,
                                          model_options(model, device_));
  return states_.emplace(rows, std::move(state)).first->second;
}

std::vector<BucketCapture> DecodeEngine::capture(const std::vector<int64_t>& rows) {
  std::vector<BucketCapture> done;
  if (options_.scope == config::InferenceCudaGraphScope::kNone) return done;
  at::NoGradGuard no_grad;
  std::optional<capture::SideStream::Use> use;
  if (stream_) use.emplace(*stream_);
  for (const int64_t count : rows) {
    GRAPHED_INTERNAL_ASSERT(std::find(buckets_.begin(), buckets_.end(), count) != buckets_.end(), "batch ", count,
                            " is not a bucket");
    const bool already =
        std::any_of(captures_.begin(), captures_.end(), [count](const BucketCapture& c) { return c.rows == count; });
    if (already) continue;
    DecodeState& state = state_for(count);
    state.reset();  // a state left at its last step would run the warmup past its buffers
    runtime::synchronize(device_);
    const capture::MemoryMark mark(device_);
    const int64_t graphs_before = runner_->graph_count();
    const auto start = Clock::now();
    runner_->prepare(state);
    runtime::synchronize(device_);
    BucketCapture result;
    result.rows = count;
    result.seconds = milliseconds_since(start) / 1000.0;
    result.graphs = runner_->graph_count() - graphs_before;
    result.memory = mark.taken_since();
    captures_.push_back(result);
    done.push_back(result);
  }
  return done;
}

void DecodeEngine::check_prompts(const std::vector<std::vector<int64_t>>& prompts, int64_t max_new_tokens) const {
  GRAPHED_CHECK(!prompts.empty(), DataError, "there is no prompt to continue; fix: give at least one prompt");
  GRAPHED_CHECK(static_cast<int64_t>(prompts.size()) <= options_.max_batch, DataError, "a batch of ", prompts.size(),
                " prompts is larger than the cache's ", options_.max_batch, " rows; fix: raise the batch size to ",
                prompts.size(), " or split the prompts");
  GRAPHED_CHECK(max_new_tokens >= 1 && max_new_tokens <= options_.max_new_tokens, DataError, "asked for ",
                max_new_tokens, " new tokens, and the engine was built for 1 to ", options_.max_new_tokens,
                "; fix: ask for fewer, or build the engine for more");
  const int64_t vocab = decode_.config().vocab_size;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const auto& prompt = prompts[i];
    GRAPHED_CHECK(!prompt.empty(), DataError, "prompt ", i + 1, " is empty; fix: give at least one token");
    const auto length = static_cast<int64_t>(prompt.size());
    GRAPHED_CHECK(length + max_new_tokens <= options_.max_sequence, DataError, "prompt ", i + 1, " has ", length,
                  " tokens, and with ", max_new_tokens, " new tokens that exceeds the context of ",
                  options_.max_sequence, " positions; fix: shorten the prompt to at most ",
                  std::max<int64_t>(0, options_.max_sequence - max_new_tokens), " tokens or ask for fewer new tokens");
    for (const int64_t id : prompt) {
      GRAPHED_CHECK(id >= 0 && id < vocab, DataError, "prompt ", i + 1, " holds token id ", id,
                    ", outside the model's vocabulary of ", vocab, " (ids 0 to ", vocab - 1,
                    "); fix: encode the prompt with the model's own tokenizer");
    }
  }
}

Generation DecodeEngine::generate(const std::vector<std::vector<int64_t>>& prompts, int64_t max_new_tokens,
                                  const TokenCallback& on_step) {
  check_prompts(prompts, max_new_tokens);
  at::NoGradGuard no_grad;
  const auto batch = static_cast<int64_t>(prompts.size());
  Generation result;
  std::tie(result.rows, result.graphed) = rows_for(batch);
  if (result.graphed) capture({result.rows});
  std::optional<capture::SideStream::Use> use;
  if (stream_) use.emplace(*stream_);
  StepRunner& runner = result.graphed ? *runner_ : *eager_;
  DecodeState& state = state_for(result.rows);
  std::vector<std::vector<int64_t>> padded = prompts;
  padded.resize(static_cast<std::size_t>(result.rows), std::vector<int64_t>{0});  // one-token dummy rows

  result.tokens.assign(prompts.size(), {});
  result.stopped.assign(prompts.size(), false);
  std::array<at::Tensor, 2> host_tokens{runtime::pinned_host_tensor({result.rows}, at::kLong, device_),
                                        runtime::pinned_host_tensor({result.rows}, at::kLong, device_)};
  std::array<std::unique_ptr<runtime::StreamEvent>, 2> ready{std::make_unique<runtime::StreamEvent>(device_),
                                                             std::make_unique<runtime::StreamEvent>(device_)};
  const auto queue_read = [&](int64_t step) {
    host_tokens[step % 2].copy_(state.tokens.view({-1}), /*non_blocking=*/true);
    ready[step % 2]->record();
  };
  int64_t active = batch;
  const auto take = [&](int64_t step) {  // the host's view of step `step`, one step behind the device
    ready[step % 2]->wait();
    const int64_t* ids = host_tokens[step % 2].data_ptr<int64_t>();
    std::vector<int64_t> this_step(prompts.size(), -1);
    for (std::size_t row = 0; row < prompts.size(); ++row) {
      if (result.stopped[row]) continue;
      this_step[row] = ids[row];
      result.tokens[row].push_back(ids[row]);
      const auto& stops = options_.stop_tokens;
      if (std::find(stops.begin(), stops.end(), ids[row]) != stops.end()) {
        result.stopped[row] = true;
        --active;
      }
    }
    if (on_step) on_step(step, this_step);
  };

  const auto start = Clock::now();
  decode_.prefill(state, padded);
  queue_read(0);
  take(0);
  result.time_to_first_token_ms = milliseconds_since(start);
  const auto decode_start = Clock::now();
  int64_t launched = 0;  // the last step the device was asked for (0: prefill's)
  int64_t taken = 1;     // steps the host has read
  while (launched + 1 < max_new_tokens && active > 0) {
    runner.step(state);
    queue_read(++launched);
    if (launched - 1 >= taken) take(taken++);  // the step before: long finished by now
  }
  while (taken <= launched) take(taken++);
  runtime::synchronize(device_);
  result.decode_ms = milliseconds_since(decode_start);
  result.decode_steps = launched;
  return result;
}

void DecodeEngine::release_graphs() {
  if (runner_) runner_->release();
  captures_.clear();
}

}  // namespace graphed::infer
