// infer/decode_engine.h — generates continuations of a batch of prompts with a static KV cache, a
// bucketed batch size and a step runner chosen once from the inference graph scope. A batch is padded
// with one-token dummy prompts to the smallest decode bucket that fits (Megatron's matching, research
// §6.5), so eager and graphed decoding run the same shapes and give the same bits; a batch larger than
// the largest bucket runs eagerly at its own size. Prefill is eager in every scope. The host reads each
// step's tokens one step behind the device, so the GPU never waits for it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "graphed/capture/capture_memory.h"
#include "graphed/capture/cuda_graph.h"
#include "graphed/config/cuda_graph_config.h"
#include "graphed/infer/decode_step.h"
#include "graphed/infer/kv_cache.h"
#include "graphed/infer/step_runner.h"

namespace graphed::infer {

struct EngineOptions {
  config::InferenceCudaGraphScope scope = config::InferenceCudaGraphScope::kNone;
  int64_t max_batch = 1;         ///< rows of the cache: the largest batch
  int64_t max_sequence = 0;      ///< cache slots per row: the longest prompt + new tokens
  int64_t max_new_tokens = 1;    ///< the most tokens one generate() call draws per prompt
  int64_t num_cuda_graphs = 16;  ///< decode buckets (Megatron's num_cuda_graphs; -1 = automatic)
  /// The largest batch that gets a graph (<= max_batch); larger batches run eagerly. Unset = max_batch.
  std::optional<int64_t> graph_max_batch;
  SamplingOptions sampling;
  std::vector<int64_t> stop_tokens;  ///< a row stops after drawing one of these (it is kept)
};

/// What capturing one bucket took.
struct BucketCapture {
  int64_t rows = 0;
  int64_t graphs = 0;
  double seconds = 0;
  capture::CaptureMemory memory;
};

struct Generation {
  std::vector<std::vector<int64_t>> tokens;  ///< per prompt: the new tokens, through the first stop token
  std::vector<bool> stopped;                 ///< per prompt: ended on a stop token (not the token limit)
  int64_t rows = 0;                          ///< the padded batch the steps ran on
  bool graphed = false;                      ///< whether decode steps replayed graphs
  double time_to_first_token_ms = 0;         ///< prefill and the first token, on the host's clock
  double decode_ms = 0;                      ///< every decode step after the first token
  int64_t decode_steps = 0;
};

/// Called after each step with the step's token of every prompt (-1 for prompts already finished).
using TokenCallback = std::function<void(int64_t step, const std::vector<int64_t>& tokens)>;

class DecodeEngine {
 public:
  /// The model must be in eval mode on `device`; its parameter dtype is the cache's. Throws
  /// ConfigError for options out of range (named by their engine names).
  DecodeEngine(model::GptModel model, const at::Device& device, EngineOptions options);
  ~DecodeEngine();
  DecodeEngine(const DecodeEngine&) = delete;
  DecodeEngine& operator=(const DecodeEngine&) = delete;

  /// The batch sizes that get graphs, largest first (empty for scope none).
  const std::vector<int64_t>& buckets() const { return buckets_; }
  /// The rows a batch of `batch` prompts runs on, and whether a graph serves it.
  std::pair<int64_t, bool> rows_for(int64_t batch) const;
  /// Captures these buckets now (each once); returns what each took.
  std::vector<BucketCapture> capture(const std::vector<int64_t>& rows);
  /// Every capture so far, in order.
  const std::vector<BucketCapture>& captures() const { return captures_; }

  /// Continues each prompt by up to max_new_tokens (<= options' max_new_tokens) tokens. Throws
  /// DataError for an empty prompt, a token id outside the vocabulary, a prompt that does not fit the
  /// cache with the new tokens, or more prompts than the cache has rows.
  Generation generate(const std::vector<std::vector<int64_t>>& prompts, int64_t max_new_tokens,
                      const TokenCallback& on_step = {});

  /// Drops every graph now (they are also freed with the engine).
  void release_graphs();
  const KvCache& cache() const { return cache_; }
  const EngineOptions& options() const { return options_; }

 private:
  void check_prompts(const std::vector<std::vector<int64_t>>& prompts, int64_t max_new_tokens) const;
  DecodeState& state_for(int64_t rows);

  at::Device device_;
  EngineOptions options_;
  DecodeStep decode_;
  KvCache cache_;
  std::vector<int64_t> row_sizes_;  // the decode buckets every scope pads a batch to, largest first
  std::vector<int64_t> buckets_;    // those that get graphs: row_sizes_, or none for scope none
  std::unique_ptr<StepRunner> runner_;
  std::unique_ptr<StepRunner> eager_;
  std::map<int64_t, DecodeState> states_;
  std::vector<BucketCapture> captures_;
  std::optional<capture::SideStream> stream_;
};

}  // namespace graphed::infer
