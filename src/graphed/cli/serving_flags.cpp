// cli/serving_flags.cpp — see cli/serving_flags.h.
#include "graphed/cli/serving_flags.h"

#include <algorithm>
#include <string>
#include <vector>

#include "graphed/cli/command_line.h"
#include "graphed/cli/speculative_config.h"
#include "graphed/infer/serving_engine.h"
#include "graphed/util/error.h"
#include "graphed/util/text.h"

namespace graphed::cli {

void add_serving_flags(CLI::App& command, ServingFlags& flags) {
  const std::string group = "Serving engine (Megatron-LM's names)";
  command
      .add_option("--inference-max-requests", flags.max_requests,
                  "requests in flight at once; more wait their turn (default: generate every prompt up to 64, bench "
                  "--serve and serve 64)")
      ->group(group);
  command
      .add_option("--inference-max-seq-length", flags.max_sequence,
                  "the most positions one request (prompt + new tokens) may hold (default: the model's context)")
      ->group(group);
  command
      .add_option("--inference-dynamic-batching-max-tokens", flags.max_tokens,
                  "tokens in one step: decode tokens plus prompt chunks (default 8192; with chunked prefill and "
                  "graphs of prompt steps, at most --inference-cuda-graph-max-tokens, so that every step has a graph)")
      ->group(group);
  command
      .add_option("--inference-dynamic-batching-block-size", flags.block_size,
                  "positions per KV cache block (default 256)")
      ->group(group);
  command
      .add_option("--inference-dynamic-batching-buffer-size-gb", flags.buffer_size_gb,
                  "KV cache memory in GB (default 0: what the device has free after the weights and a step's "
                  "working memory, at most 40)")
      ->group(group);
  command
      .add_option("--inference-cuda-graph-max-tokens", flags.cuda_graph_max_tokens,
                  "the largest step (in tokens) that gets a graph (default 512); with chunked prefill it also bounds "
                  "the tokens of every step (the chunked prefill budget)")
      ->group(group);
  command
      .add_option("--inference-dynamic-batching-cuda-graph-mixed-prefill-count", flags.mixed_prefill_count,
                  "prefill requests a mixed graph holds (default 16)")
      ->group(group);
  command
      .add_flag("--decode-only-cuda-graphs", flags.decode_only_cuda_graphs,
                "graphs for decode-only steps alone; prefill and mixed steps run eagerly")
      ->group(group);
  command
      .add_flag("--disable-chunked-prefill", flags.disable_chunked_prefill,
                "a prompt waits until a step has room for it whole, instead of running in chunks")
      ->group(group);
  command
      .add_flag("--enable-prefix-caching", flags.enable_prefix_caching,
                "a request whose prompt begins with the same full cache blocks as a running request's shares "
                "their keys and values instead of computing them (not for Mamba-hybrid models)")
      ->group(group);
  command
      .add_flag("--no-async-scheduling", flags.no_async_scheduling,
                "read each step's tokens before scheduling the next, instead of scheduling a step ahead while the "
                "device runs the last (for comparison)")
      ->group(group);
  command
      .add_option("--quantization", flags.quantization,
                  "none (default), or fp8: linear weights cast once to FP8 E4M3 with a scale per output row, so a "
                  "decode step reads half the bytes (bf16 models on GPUs with FP8 tensor cores: Ada, Hopper, "
                  "Blackwell)")
      ->group(group);
  command
      .add_option(
          "--speculative-config", flags.speculative_config,
          "speculative decoding, in vLLM's JSON: {\"method\": \"ngram\", \"num_speculative_tokens\": K, "
          "\"prompt_lookup_max\": N, \"prompt_lookup_min\": M}: each step a request proposes the K tokens that "
          "followed the latest earlier occurrence of its last N..M tokens; or {\"method\": \"draft_model\", "
          "\"model\": DIR, \"num_speculative_tokens\": K}: a smaller model of the same tokenizer (a graphed "
          "checkpoint or a Hugging Face folder) proposes K tokens greedily. The model verifies them at once, and "
          "the text is exactly what decoding without it gives (greedy, and sampled with a seed). Requests with "
          "logprobs, penalties, logit bias, min tokens, min-p or structured output decode without it; not for "
          "Mamba-hybrid models or tensor parallelism, nor bench --decode (default: off)")
      ->group(group);
}

void add_serve_bench_flags(CLI::App& bench, ServeBenchFlags& flags) {
  const std::string group = "Serving benchmark (bench --serve)";
  bench
      .add_flag("--serve", flags.serve,
                "time the serving engine on a seeded workload instead of training: "
                "requests/s, output tokens/s, time to first token and per output token (p50, p99)")
      ->group(group);
  bench.add_option("--requests", flags.requests, "requests in the workload (default 64)")->group(group);
  bench.add_option("--prompt-lengths", flags.prompt_lengths, "prompt tokens, A..B (default 64..2048)")->group(group);
  bench.add_option("--output-lengths", flags.output_lengths, "new tokens per request, C..D (default 32..512)")
      ->group(group);
  bench
      .add_option("--length-distribution", flags.distribution,
                  "uniform (default), or long-tail: most lengths near the low end, a few near the high end")
      ->group(group);
  bench
      .add_option("--request-rate", flags.request_rate,
                  "requests per second, arriving as a Poisson process (default 0: all at once)")
      ->group(group);
  bench
      .add_option("--shared-prefix-tokens", flags.shared_prefix,
                  "every prompt starts with the same this many tokens, as a shared system prompt would "
                  "(default 0; see --enable-prefix-caching)")
      ->group(group);
  bench
      .add_option("--temperature", flags.temperature,
                  "0 = greedy (default); else every request samples from softmax(logits / T) with a seed of its own")
      ->group(group);
  bench.add_option("--top-k", flags.top_k, "sample among the k likeliest tokens; 0 = all (default)")->group(group);
  bench
      .add_option("--top-p", flags.top_p,
                  "sample among the likeliest tokens holding this probability; 1 = all (default)")
      ->group(group);
  bench
      .add_option("--profile-phase", flags.profile_phase,
                  "the steps --profile-iterations profiles after the timed run: one-request (default: decode steps "
                  "of one more request), mixed (steps of prompt chunks and decodes once the workload's first "
                  "requests, up to the request limit, arrive at once), or decode (steps where every one of them "
                  "decodes)")
      ->group(group);
  bench
      .add_option("--logprobs", flags.logprobs,
                  "every request asks for each drawn token's log probability and the K likeliest tokens' (0 to 20; "
                  "default: none)")
      ->group(group);
  bench
      .add_option("--json-schema", flags.json_schema,
                  "every request's output follows the JSON schema in FILE (documents back to back; the masks over "
                  "a synthetic vocabulary of the model's size)")
      ->group(group);
}

infer::ServingOptions serving_options(const ServingFlags& flags, const config::CudaGraphConfig& graphs,
                                      int64_t default_max_requests) {
  std::vector<std::string> problems;
  const auto at_least = [&](const char* flag, int64_t value, int64_t least) {
    if (value < least) {
      problems.push_back(std::string(flag) + " is " + std::to_string(value) + "; fix: give " + std::to_string(least) +
                         " or more");
    }
  };
  infer::ServingOptions options;
  options.scope = graphs.inference_scope;
  options.num_cuda_graphs = graphs.inference_num_cuda_graphs;
  options.max_requests = flags.max_requests.value_or(default_max_requests);
  at_least("--inference-max-requests", options.max_requests, 1);
  if (flags.max_sequence) {
    at_least("--inference-max-seq-length", *flags.max_sequence, 2);
    options.max_sequence = *flags.max_sequence;
  }
  options.max_tokens = flags.max_tokens;
  at_least("--inference-dynamic-batching-max-tokens", options.max_tokens, 1);
  if (problems.empty() && options.max_tokens < options.max_requests) {
    problems.push_back(
        "--inference-dynamic-batching-max-tokens " + std::to_string(options.max_tokens) +
        " is below --inference-max-requests " + std::to_string(options.max_requests) +
        ", and every request in flight decodes one token a step; fix: raise the tokens or lower the requests");
  }
  options.block_size = flags.block_size;
  if (flags.block_size < 1 || flags.block_size > 4096) {
    problems.push_back("--inference-dynamic-batching-block-size is " + std::to_string(flags.block_size) +
                       "; fix: give 1 to 4096 (Megatron uses 256)");
  }
  options.buffer_size_gb = flags.buffer_size_gb;
  if (!(flags.buffer_size_gb >= 0)) {
    problems.push_back("--inference-dynamic-batching-buffer-size-gb is " + format_number(flags.buffer_size_gb) +
                       "; fix: give a size in GB, or 0 for what fits");
  }
  options.cuda_graph_max_tokens = flags.cuda_graph_max_tokens;
  at_least("--inference-cuda-graph-max-tokens", flags.cuda_graph_max_tokens, 1);
  options.mixed_prefill_count = flags.mixed_prefill_count;
  at_least("--inference-dynamic-batching-cuda-graph-mixed-prefill-count", flags.mixed_prefill_count, 1);
  options.decode_only_cuda_graphs = flags.decode_only_cuda_graphs;
  options.chunked_prefill = !flags.disable_chunked_prefill;
  options.prefix_sharing = flags.enable_prefix_caching;
  options.async_scheduling = !flags.no_async_scheduling;
  try {
    options.speculation = parse_speculative_config(flags.speculative_config);
  } catch (const graphed::ConfigError& error) {
    problems.push_back(error.what());
  }
  if (!problems.empty()) fail_with(problems);
  return options;
}

std::string refusal_fix(const infer::Rejection& refused, const std::string& new_tokens_flag) {
  switch (refused.part) {
    case infer::RejectedPart::kPrompt: return refused.remedy;
    case infer::RejectedPart::kMaxNewTokens: {  // "ask for at most 3 new tokens (--max-new-tokens), or shorten ..."
      std::string remedy = refused.remedy;
      return remedy.insert(std::min(remedy.find(", or "), remedy.size()), " (" + new_tokens_flag + ")");
    }
    case infer::RejectedPart::kSampling: return refused.remedy + " (--temperature, --top-k, --top-p)";
    case infer::RejectedPart::kCache:
      return "ask for fewer tokens, or give the cache more memory with --inference-dynamic-batching-buffer-size-gb";
    case infer::RejectedPart::kStepTokens:
      return "drop --disable-chunked-prefill, or raise --inference-dynamic-batching-max-tokens";
  }
  return refused.remedy;
}

}  // namespace graphed::cli
