// cli/serving_flags.h — the serving engine's flags, by Megatron-LM's names (arguments.py), shared by
// `graphed generate` and `graphed bench --serve`: how many requests run at once, tokens per step, the
// paged cache's block size and memory, the graph list's limits, chunked prefill. They map onto
// infer::ServingOptions here, and a bad value is a ConfigError naming the flag.
#pragma once

#include <cstdint>
#include <optional>

#include <string>

#include <CLI/CLI.hpp>

#include "graphed/config/cuda_graph_config.h"

namespace graphed::infer {
struct ServingOptions;
struct Rejection;
}  // namespace graphed::infer

namespace graphed::cli {

struct ServingFlags {
  std::optional<int64_t> max_requests;   ///< --inference-max-requests; unset = the command's default
  std::optional<int64_t> max_sequence;   ///< --inference-max-seq-length; unset = the model's context
  int64_t max_tokens = 8192;             ///< --inference-dynamic-batching-max-tokens
  int64_t block_size = 256;              ///< --inference-dynamic-batching-block-size
  double buffer_size_gb = 0;             ///< --inference-dynamic-batching-buffer-size-gb; 0 = what fits
  int64_t cuda_graph_max_tokens = 512;   ///< --inference-cuda-graph-max-tokens
  int64_t mixed_prefill_count = 16;      ///< --inference-dynamic-batching-cuda-graph-mixed-prefill-count
  bool decode_only_cuda_graphs = false;  ///< --decode-only-cuda-graphs
  bool disable_chunked_prefill = false;  ///< --disable-chunked-prefill
  bool enable_prefix_caching = false;    ///< --enable-prefix-caching (vLLM's name; Megatron has none)
  bool no_async_scheduling = false;      ///< --no-async-scheduling (vLLM's --async-scheduling is the default here)
  std::string quantization = "none";     ///< --quantization none|fp8 (vLLM's name; cli/quantization.h)
  std::string speculative_config;        ///< --speculative-config JSON (vLLM's; cli/speculative_config.h)
};

/// `graphed bench --serve`'s workload.
struct ServeBenchFlags {
  bool serve = false;                       ///< --serve
  int64_t requests = 64;                    ///< --requests
  std::string prompt_lengths = "64..2048";  ///< --prompt-lengths A..B
  std::string output_lengths = "32..512";   ///< --output-lengths C..D
  std::string distribution = "uniform";     ///< --length-distribution uniform|long-tail
  double request_rate = 0;                  ///< --request-rate R (requests/s, Poisson); 0 = all at once
  int64_t shared_prefix = 0;                ///< --shared-prefix-tokens N: every prompt starts with the same N tokens
  double temperature = 0;                   ///< --temperature: 0 = greedy; each request draws with its own seed
  int64_t top_k = 0;                        ///< --top-k; 0 = all
  double top_p = 1.0;                       ///< --top-p; 1 = all
  /// --profile-phase: which steps --profile-iterations profiles: one-request (batch 1 decode), mixed (prompt
  /// chunks with decodes, the workload's requests at once), decode (every one of them decoding)
  std::string profile_phase = "one-request";
  int64_t logprobs = -1;    ///< --logprobs K: every request asks for log probabilities with K alternatives
  std::string json_schema;  ///< --json-schema FILE: every request's output follows the schema
};

/// Registers the flags on a command, in their own help group.
void add_serving_flags(CLI::App& command, ServingFlags& flags);

/// Registers bench's --serve flags.
void add_serve_bench_flags(CLI::App& bench, ServeBenchFlags& flags);

/// The engine's options from the flags, the graph settings (scope, --inference-dynamic-batching-num-
/// cuda-graphs) and the command's default request limit. Throws ConfigError naming each bad flag.
infer::ServingOptions serving_options(const ServingFlags& flags, const config::CudaGraphConfig& graphs,
                                      int64_t default_max_requests);

/// The fix of an engine's refusal in flags: its remedy, with the flags that change what it is about (the
/// command's `new_tokens_flag`, the cache's memory, chunked prefill, the sampling flags).
std::string refusal_fix(const infer::Rejection& refused, const std::string& new_tokens_flag);

}  // namespace graphed::cli
