// cli/bench_serve.cpp — see cli/bench_serve.h. Time to first token runs from a request's arrival (its
// scheduled time) to the end of the step that drew its first token; time per output token is the time
// from its first token to its last over the tokens after the first. Graphs are captured, and a small
// warmup run goes through the eager paths, before the clock starts; the report counts the timed run.
#include "graphed/cli/bench_serve.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include "graphed/cli/bench_constraints.h"
#include "graphed/cli/draft_model.h"
#include "graphed/cli/engine_report.h"
#include "graphed/cli/generate_setup.h"
#include "graphed/cli/quantization.h"
#include "graphed/cli/run_setup.h"
#include "graphed/cli/serving_flags.h"
#include "graphed/infer/serving_engine.h"
#include "graphed/infer/serving_floor.h"
#include "graphed/runtime/device.h"
#include "graphed/runtime/peak_throughput.h"
#include "graphed/util/error.h"
#include "graphed/util/statistics.h"
#include "graphed/util/text.h"

namespace graphed::cli {

std::pair<int64_t, int64_t> parse_length_range(const std::string& text, const std::string& flag) {
  const auto dots = text.find("..");
  try {
    std::size_t used = 0;
    const int64_t low = std::stoll(text.substr(0, dots), &used);
    const bool whole = used == (dots == std::string::npos ? text.size() : dots);
    const int64_t high = dots == std::string::npos ? low : std::stoll(text.substr(dots + 2), &used);
    if (whole && (dots == std::string::npos || used == text.size() - dots - 2) && low >= 1 && high >= low) {
      return {low, high};
    }
  } catch (const std::exception&) {  // not a number: the message below
  }
  throw ConfigError(flag + " is '" + text + "'; fix: give A..B with 1 <= A <= B (e.g. 64..2048), or one length");
}

ServeWorkload make_workload(const ServeBenchFlags& flags, uint64_t seed) {
  const auto prompts = parse_length_range(flags.prompt_lengths, "--prompt-lengths");
  const auto outputs = parse_length_range(flags.output_lengths, "--output-lengths");
  GRAPHED_CHECK(flags.requests >= 1, ConfigError, "--requests is ", flags.requests, "; fix: give 1 or more");
  GRAPHED_CHECK(flags.distribution == "uniform" || flags.distribution == "long-tail", ConfigError,
                "--length-distribution is '", flags.distribution, "'; fix: give uniform or long-tail");
  GRAPHED_CHECK(flags.request_rate >= 0 && std::isfinite(flags.request_rate), ConfigError, "--request-rate is ",
                flags.request_rate, "; fix: give requests per second, or 0 for all at once");
  GRAPHED_CHECK(flags.shared_prefix >= 0 && flags.shared_prefix < prompts.first, ConfigError,
                "--shared-prefix-tokens is ", flags.shared_prefix, " and the shortest prompt ", prompts.first,
                " tokens; fix: give 0 to ", prompts.first - 1);
  GRAPHED_CHECK(flags.temperature >= 0 && std::isfinite(flags.temperature), ConfigError, "--temperature is ",
                flags.temperature, "; fix: give 0 (greedy) or a positive number");
  GRAPHED_CHECK(flags.top_k >= 0, ConfigError, "--top-k is ", flags.top_k, "; fix: give 0 (all) or more");
  GRAPHED_CHECK(flags.top_p > 0 && flags.top_p <= 1, ConfigError, "--top-p is ", flags.top_p,
                "; fix: give a value in (0, 1]");
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // long-tail: exponential above the low end with a mean of an eighth of the range, cut at the high end.
  const auto draw = [&](std::pair<int64_t, int64_t> range) {
    const double span = static_cast<double>(range.second - range.first);
    const double u = unit(random);
    const double offset =
        flags.distribution == "uniform" ? std::floor(u * (span + 1.0)) : std::floor(-std::log(1.0 - u) * span / 8.0);
    return range.first + std::min<int64_t>(static_cast<int64_t>(offset), range.second - range.first);
  };
  ServeWorkload workload;
  workload.shared_prefix = flags.shared_prefix;
  double clock = 0;
  for (int64_t i = 0; i < flags.requests; ++i) {
    workload.prompt_lengths.push_back(draw(prompts));
    workload.output_lengths.push_back(draw(outputs));
    if (flags.request_rate > 0) clock += -std::log(1.0 - unit(random)) / flags.request_rate;
    workload.arrival_seconds.push_back(clock);
  }
  return workload;
}

namespace {

using Clock = std::chrono::steady_clock;

struct ServedModel {
  model::GptModel model{nullptr};
  std::string description;
  int64_t context = 0;
};

ServedModel served_model(const CommandLine& command_line, const at::Device& device) {
  ServedModel served;
  if (command_line.settings.train.load || !command_line.generate.hf_folder.empty()) {
    GenerationModel loaded = load_generation_model(command_line, device, std::cerr);
    served.model = loaded.model;
    served.description = loaded.description;
    served.context = loaded.context;
    return served;
  }
  config::Settings settings = command_line.settings;
  settings.model.attention_dropout = 0.0;
  settings.model.hidden_dropout = 0.0;
  settings.train.mock_data = true;
  const config::RunConfig config = resolve_settings(settings);
  at::manual_seed(config.train.seed);
  served.model = model::GptModel(config.model, config.moe_layers);
  served.model->to(device, device.is_cuda() ? at::kBFloat16 : at::kFloat);
  served.model->eval();
  served.description = (command_line.preset ? "preset " + *command_line.preset : std::string("the settings' model")) +
                       ", random weights";
  served.context = config.model.max_position_embeddings.value_or(config.model.seq_length);
  return served;
}

std::vector<int64_t> random_prompt(int64_t length, int64_t vocabulary, std::mt19937_64& random) {
  std::uniform_int_distribution<int64_t> id(0, vocabulary - 1);
  std::vector<int64_t> prompt(static_cast<std::size_t>(length));
  for (auto& token : prompt) token = id(random);
  return prompt;
}

/// A request of the workload: no stop tokens (it draws exactly its length), the sampling flags, its own seed.
infer::RequestOptions request_options(const ServeBenchFlags& flags, int64_t new_tokens, uint64_t seed) {
  infer::RequestOptions options;
  options.max_new_tokens = new_tokens;
  options.sampling.temperature = flags.temperature;
  options.sampling.top_k = flags.top_k;
  options.sampling.top_p = flags.top_p;
  options.sampling.seed = seed;
  return options;
}

/// Per request of the timed run.
struct Timings {
  std::vector<double> ttft_ms;
  std::vector<double> tpot_ms;
  std::vector<double> step_ms;  ///< each step() call that read a step: the host's clock
  std::vector<double> host_ms;  ///< of it, the host's own work
  double device_seconds = 0;    ///< the read steps' spans on the device
  int64_t output_tokens = 0;
  double seconds = 0;
  std::vector<std::string> refused;
};

Timings run_workload(infer::ServingEngine& engine, const ServeWorkload& workload, const ServeBenchFlags& flags,
                     int64_t vocabulary, uint64_t seed, const RequestDecoration& decorate) {
  std::mt19937_64 random(seed ^ 0x5eedULL);
  const std::vector<int64_t> prefix = random_prompt(workload.shared_prefix, vocabulary, random);
  std::vector<std::vector<int64_t>> prompts;
  for (const int64_t length : workload.prompt_lengths) {
    std::vector<int64_t> prompt = random_prompt(length, vocabulary, random);
    std::copy(prefix.begin(), prefix.end(), prompt.begin());
    prompts.push_back(std::move(prompt));
  }
  struct Progress {
    double arrival = 0, first = -1, last = 0;
    int64_t tokens = 0;
  };
  std::map<int64_t, Progress> progress;
  Timings timings;
  const auto start = Clock::now();
  const auto now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::size_t next = 0;
  while (next < prompts.size() || engine.has_work()) {
    for (; next < prompts.size() && workload.arrival_seconds[next] <= now(); ++next) {
      infer::RequestOptions options = request_options(flags, workload.output_lengths[next], seed + next);
      decorate(options);
      const int64_t id = engine.add_request(prompts[next], std::move(options));
      progress[id].arrival = workload.arrival_seconds[next];
    }
    if (!engine.has_work()) {
      std::this_thread::sleep_for(std::chrono::duration<double>(workload.arrival_seconds[next] - now()));
      continue;
    }
    const infer::StepResult step = engine.step();
    const double at = now();
    if (step.real.token_count > 0) {
      timings.step_ms.push_back(step.timing.seconds * 1000.0);
      timings.host_ms.push_back(step.timing.host_seconds * 1000.0);
      timings.device_seconds += step.timing.device_seconds;
    }
    for (const auto& token : step.tokens) {
      Progress& request = progress[token.request];
      if (request.first < 0) request.first = at;
      request.last = at;
      ++request.tokens;
    }
    for (const auto& done : step.finished) {
      if (done.reason == infer::FinishReason::kRejected) timings.refused.push_back(done.message);
    }
  }
  timings.seconds = now();
  for (const auto& [id, request] : progress) {
    if (request.first < 0) continue;
    timings.output_tokens += request.tokens;
    timings.ttft_ms.push_back((request.first - request.arrival) * 1000.0);
    if (request.tokens > 1)
      timings.tpot_ms.push_back((request.last - request.first) * 1000.0 / static_cast<double>(request.tokens - 1));
  }
  return timings;
}

/// --profile-iterations N with --serve, --profile-phase one-request: one more request after the timed run (the
/// first prompt), whose decode steps 9 to 8 + N run inside a profiler range (ncu --profile-from-start off), the
/// step loop and its host work included.
void profile_one_request(infer::ServingEngine& engine, const std::vector<int64_t>& prompt, const ServeBenchFlags& flags,
                         int64_t steps, const at::Device& device) {
  constexpr int64_t kWarmSteps = 8;
  engine.add_request(prompt, request_options(flags, kWarmSteps + steps + 1, 0));
  for (int64_t i = 0; i < kWarmSteps + 1 && engine.has_work(); ++i) engine.step();  // the prompt, then 8 decode steps
  {
    runtime::ProfilerRange range(device);
    for (int64_t i = 0; i < steps && engine.has_work(); ++i) engine.step();
  }
  while (engine.has_work()) engine.step();
}

/// --profile-phase mixed or decode: the workload's first requests (up to the request limit) arrive at once after
/// the timed run, each asking for as many tokens as its context holds, so that none ends during the profile. The
/// N steps in the profiler range are the first whose step before held prompt chunks with at least half of the
/// requests decoding (mixed), or every request decoding (decode). The requests are cancelled after.
void profile_loaded_steps(infer::ServingEngine& engine, const ServeWorkload& workload, const ServeBenchFlags& flags,
                          int64_t vocabulary, uint64_t seed, int64_t steps, const at::Device& device) {
  const bool mixed = flags.profile_phase == "mixed";
  const auto count = static_cast<int64_t>(
      std::min<std::size_t>(workload.prompt_lengths.size(), static_cast<std::size_t>(engine.options().max_requests)));
  std::mt19937_64 random(seed + 2);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t length = std::min(workload.prompt_lengths[static_cast<std::size_t>(i)], engine.max_sequence() - 1);
    ids.push_back(engine.add_request(random_prompt(length, vocabulary, random),
                                     request_options(flags, engine.max_sequence() - length, seed + i)));
  }
  const auto in_phase = [&](const infer::StepResult& step) {
    if (mixed) return step.real.prefill_count > 0 && 2 * step.real.decode_count >= count;
    return step.real.prefill_count == 0 && step.real.decode_count == count;
  };
  bool reached = false;
  while (!reached && engine.has_work()) reached = in_phase(engine.step());
  if (reached) {
    runtime::ProfilerRange range(device);
    for (int64_t i = 0; i < steps && engine.has_work(); ++i) engine.step();
  } else {
    std::cerr << "bench: the profile's requests never reached the " << flags.profile_phase
              << " phase, so no step was profiled\n";
  }
  for (const int64_t id : ids) engine.cancel(id);
  while (engine.has_work()) engine.step();
}

nlohmann::json model_shape(const config::ModelConfig& config, int64_t context) {
  return {{"hidden_size", config.hidden_size},
          {"ffn_hidden_size", config.ffn_hidden_size.value_or(4 * config.hidden_size)},
          {"num_layers", config.num_layers},
          {"num_attention_heads", config.num_attention_heads},
          {"num_query_groups", config.num_query_groups.value_or(config.num_attention_heads)},
          {"vocab_size", config.vocab_size},
          {"max_position_embeddings", context},
          {"rotary_base", config.rotary_base},
          {"norm_epsilon", config.norm_epsilon},
          {"untie_embeddings_and_output_weights", config.untie_embeddings_and_output_weights}};
}

}  // namespace

void refuse_serve_flags_without_serve(const CommandLine& command_line) {
  const ServeBenchFlags& given = command_line.serve_bench;
  const ServeBenchFlags workload;
  const ServingFlags engine;
  const ServingFlags& serving = command_line.serving;
  const bool workload_given =
      given.requests != workload.requests || given.prompt_lengths != workload.prompt_lengths ||
      given.output_lengths != workload.output_lengths || given.distribution != workload.distribution ||
      given.request_rate != workload.request_rate || given.shared_prefix != workload.shared_prefix ||
      given.temperature != workload.temperature || given.top_k != workload.top_k || given.top_p != workload.top_p ||
      given.profile_phase != workload.profile_phase || given.logprobs != workload.logprobs ||
      given.json_schema != workload.json_schema;
  const bool engine_given =
      serving.max_requests || serving.max_sequence || serving.max_tokens != engine.max_tokens ||
      serving.block_size != engine.block_size || serving.buffer_size_gb != engine.buffer_size_gb ||
      serving.cuda_graph_max_tokens != engine.cuda_graph_max_tokens ||
      serving.mixed_prefill_count != engine.mixed_prefill_count || serving.decode_only_cuda_graphs ||
      serving.disable_chunked_prefill || serving.enable_prefix_caching || serving.no_async_scheduling ||
      !serving.speculative_config.empty() || !command_line.generate.hf_folder.empty();
  if (workload_given || engine_given) {
    throw ConfigError(std::string(workload_given ? "a serving workload flag" : "a serving engine flag (or --hf)") +
                      " was given to graphed bench without --serve, where it does nothing; fix: add --serve, or leave "
                      "it out");
  }
}

namespace {

/// Refuses a workload none of whose requests can run, naming the flags and the context; a workload that partly
/// fits runs, its refusals counted. Asks the engine about each request's lengths (the ids do not matter).
void refuse_a_workload_that_cannot_run(const infer::ServingEngine& engine, const ServeWorkload& workload,
                                       const ServeBenchFlags& flags) {
  std::optional<infer::Rejection> first;
  for (std::size_t i = 0; i < workload.prompt_lengths.size(); ++i) {
    const std::vector<int64_t> prompt(static_cast<std::size_t>(workload.prompt_lengths[i]), 0);
    const auto refused = engine.rejection(prompt, request_options(flags, workload.output_lengths[i], 0));
    if (!refused) return;
    if (!first) first = refused;
  }
  const int64_t context = engine.max_sequence();
  std::string fix = refusal_fix(*first, "--output-lengths");
  if (first->part == infer::RejectedPart::kPrompt || first->part == infer::RejectedPart::kMaxNewTokens) {
    const int64_t half = std::max<int64_t>(1, context / 2);
    fix = "pass --prompt-lengths and --output-lengths whose sums fit the context of " + std::to_string(context) +
          " positions, e.g. --prompt-lengths " + std::to_string(std::max<int64_t>(1, context / 8)) + ".." +
          std::to_string(half) + " --output-lengths " + std::to_string(std::max<int64_t>(1, context / 16)) + ".." +
          std::to_string(context - half);
  }
  throw ConfigError("bench --serve: none of the " + std::to_string(flags.requests) + " requests (prompts " +
                    flags.prompt_lengths + " tokens, outputs " + flags.output_lengths +
                    ") can run; the first refused: " + first->problem + "; fix: " + fix);
}

std::string sampling_text(const ServeBenchFlags& flags) {
  if (flags.temperature <= 0) return "greedy";
  std::string text = "temperature " + format_number(flags.temperature);
  if (flags.top_k > 0) text += ", top-k " + std::to_string(flags.top_k);
  if (flags.top_p < 1) text += ", top-p " + format_number(flags.top_p);
  return text;
}

nlohmann::json result_json(const ServeBenchFlags& flags, const ServeWorkload& workload, uint64_t seed,
                           const Timings& timings) {
  const auto served = flags.requests - static_cast<int64_t>(timings.refused.size());
  return {{"workload",
           {{"prompt_lengths", workload.prompt_lengths},
            {"output_lengths", workload.output_lengths},
            {"arrival_seconds", workload.arrival_seconds},
            {"seed", seed},
            {"distribution", flags.distribution},
            {"request_rate", flags.request_rate},
            {"shared_prefix_tokens", flags.shared_prefix}}},
          {"sampling", {{"temperature", flags.temperature}, {"top_k", flags.top_k}, {"top_p", flags.top_p}}},
          {"logprobs", flags.logprobs},
          {"json_schema", flags.json_schema},
          {"requests", flags.requests},
          {"refused_requests", timings.refused.size()},
          {"refused", timings.refused},
          {"output_tokens", timings.output_tokens},
          {"seconds", timings.seconds},
          {"requests_per_second", static_cast<double>(served) / timings.seconds},
          {"output_tokens_per_second", static_cast<double>(timings.output_tokens) / timings.seconds},
          {"ttft_ms_p50", percentile(timings.ttft_ms, 0.5)},
          {"ttft_ms_p99", percentile(timings.ttft_ms, 0.99)},
          {"tpot_ms_p50", percentile(timings.tpot_ms, 0.5)},
          {"tpot_ms_p99", percentile(timings.tpot_ms, 0.99)},
          {"step_ms_p50", percentile(timings.step_ms, 0.5)},
          {"step_ms_p99", percentile(timings.step_ms, 0.99)},
          {"host_ms_per_step_p50", percentile(timings.host_ms, 0.5)},
          {"device_busy_share", timings.device_seconds / timings.seconds}};
}

/// The workload's floor on this GPU (infer/serving_floor.h) and the share of it the run reached; nulls where the
/// device's peaks are unknown (the CPU, an unknown GPU).
nlohmann::json floor_json(model::GptModel& model, const ServeWorkload& workload, int64_t max_requests,
                          const at::Device& device, double seconds) {
  const auto flops = runtime::peak_throughput(device, true);
  const auto bandwidth = runtime::peak_memory_bandwidth(device);
  if (!device.is_cuda() || !flops || !bandwidth) {
    return {
        {"floor_seconds", nullptr}, {"floor_share", nullptr}, {"floor_basis", "no published peaks for this device"}};
  }
  const infer::ServingFloor floor =
      infer::serving_floor(model, workload.prompt_lengths, workload.output_lengths, max_requests,
                           flops->flops_per_second, bandwidth->bytes_per_second);
  return {{"floor_seconds", floor.seconds()},
          {"floor_compute_seconds", floor.compute_seconds},
          {"floor_memory_seconds", floor.memory_seconds},
          {"floor_decode_steps", floor.decode_steps},
          {"floor_share", floor.seconds() / seconds},
          {"floor_basis", flops->basis + "; " + bandwidth->basis}};
}

void print_table(const nlohmann::json& result, const ServeBenchFlags& flags, const std::string& model,
                 const std::string& device, const infer::ServingEngine& engine, const infer::EngineStats& stats,
                 const Timings& timings, std::ostream& out) {
  out << "serving " << flags.requests << " requests (prompts " << flags.prompt_lengths << ", outputs "
      << flags.output_lengths << ", " << flags.distribution << ", "
      << (flags.request_rate > 0 ? fixed_decimals(flags.request_rate, 1) + " requests/s" : "all at once") << ", "
      << sampling_text(flags) << ") on " << model << ", " << device << "\n";
  if (const std::string extras = decoration_text(flags.logprobs, flags.json_schema); !extras.empty()) {
    out << "every request: " << extras << "; " << stats.masked_steps << " masked steps, the host's masks "
        << fixed_decimals(stats.masked_steps > 0 ? 1000.0 * stats.mask_seconds / stats.masked_steps : 0.0, 3)
        << " ms a step\n";
  }
  const auto floor_share =
      result["floor_share"].is_null() ? std::string("-") : fixed_decimals(result["floor_share"].get<double>(), 3);
  out << "| requests/s | output tokens/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms | seconds | floor share | peak blocks "
         "| refused |\n"
      << "|---|---|---|---|---|---|---|---|\n"
      << "| " << fixed_decimals(result["requests_per_second"], 2) << " | "
      << fixed_decimals(result["output_tokens_per_second"], 0) << " | " << fixed_decimals(result["ttft_ms_p50"], 1)
      << " / " << fixed_decimals(result["ttft_ms_p99"], 1) << " | " << fixed_decimals(result["tpot_ms_p50"], 2) << " / "
      << fixed_decimals(result["tpot_ms_p99"], 2) << " | " << fixed_decimals(timings.seconds, 2) << " | " << floor_share
      << " | " << stats.peak_blocks << " of " << engine.blocks_total() << " | " << timings.refused.size() << " |\n";
  out << "steps: " << timings.step_ms.size() << ", " << fixed_decimals(result["step_ms_p50"], 2) << " ms at p50 ("
      << fixed_decimals(result["step_ms_p99"], 2) << " at p99), the host's own work "
      << fixed_decimals(result["host_ms_per_step_p50"], 3) << " ms at p50; the device busy "
      << fixed_decimals(100.0 * result["device_busy_share"].get<double>(), 1) << "% of the run\n";
  print_engine_line(engine, stats, out);
  if (!timings.refused.empty()) {
    out << "refused: " << timings.refused.size() << " of " << flags.requests
        << " requests, not counted above; the first: " << timings.refused.front() << "\n";
  }
}

}  // namespace

int run_bench_serve(const CommandLine& command_line, std::ostream& out) {
  refuse_multi_process_launch("bench");
  const ServeBenchFlags& flags = command_line.serve_bench;
  const auto seed = static_cast<uint64_t>(command_line.settings.train.seed);
  const ServeWorkload workload = make_workload(flags, seed);
  GRAPHED_CHECK(
      flags.profile_phase == "one-request" || flags.profile_phase == "mixed" || flags.profile_phase == "decode",
      ConfigError, "--profile-phase is '", flags.profile_phase, "'; fix: give one-request, mixed or decode");
  const at::Device device = choose_device(command_line.settings.train.device, "serving eagerly in fp32");
  const config::CudaGraphConfig graphs = resolve_decode_graphs(command_line, device, std::cerr);
  ServedModel served = served_model(command_line, device);
  {
    const at::NoGradGuard no_grad;
    apply_quantization(command_line.serving.quantization, served.model, device, std::cerr);
  }
  infer::ServingOptions options = serving_options(command_line.serving, graphs, 64);
  if (!command_line.serving.max_sequence) options.max_sequence = served.context;
  const int64_t vocabulary = served.model->config().vocab_size;
  at::NoGradGuard no_grad;
  const RequestDecoration decorate = bench_decoration(flags.logprobs, flags.json_schema, vocabulary);
  attach_draft_model(options, command_line, device, /*target_tokenizer=*/nullptr, vocabulary, std::cerr);
  infer::ServingEngine engine(served.model, device, options);
  refuse_a_workload_that_cannot_run(engine, workload, flags);
  // The workload's own sampling mode and features, so that no graph is captured while the clock runs.
  infer::RequestOptions decorated = request_options(flags, 1, 0);
  decorate(decorated);
  engine.capture_graphs({infer::SamplingMode::kGreedy, infer::sampling_mode_of(decorated.sampling)},
                        infer::features_of(decorated));
  // Warmup: the longest prompt and a few short ones through every eager path, untimed.
  ServeWorkload warmup;
  const int64_t longest = *std::max_element(workload.prompt_lengths.begin(), workload.prompt_lengths.end());
  for (const int64_t length : {longest, int64_t{8}, int64_t{8}}) {
    warmup.prompt_lengths.push_back(std::max<int64_t>(1, std::min(length, options.max_sequence - 4)));
    warmup.output_lengths.push_back(4);
    warmup.arrival_seconds.push_back(0);
  }
  run_workload(engine, warmup, flags, vocabulary, seed + 1, decorate);
  const infer::EngineStats before = engine.stats();
  const Timings timings = run_workload(engine, workload, flags, vocabulary, seed, decorate);
  const infer::EngineStats stats = stats_since(engine.stats(), before);
  if (command_line.profile_iterations > 0 && flags.profile_phase == "one-request") {
    std::mt19937_64 random(seed);
    const int64_t length =
        std::min(workload.prompt_lengths.front(), options.max_sequence - command_line.profile_iterations - 10);
    profile_one_request(engine, random_prompt(std::max<int64_t>(1, length), vocabulary, random), flags,
                        command_line.profile_iterations, device);
  } else if (command_line.profile_iterations > 0) {
    profile_loaded_steps(engine, workload, flags, vocabulary, seed, command_line.profile_iterations, device);
  }
  nlohmann::json result{{"device", runtime::device_name(device)},
                        {"model", served.description},
                        {"model_shape", model_shape(served.model->config(), served.context)}};
  result.update(result_json(flags, workload, seed, timings));
  result.update(floor_json(served.model, workload, options.max_requests, device, timings.seconds));
  result["graph_steps"] = stats.graph_steps;
  result["eager_steps"] = stats.eager_steps;
  result["engine"] = engine_json(engine, stats);
  if (command_line.json_output) {
    out << result.dump() << std::endl;
  } else {
    print_table(result, flags, served.description, runtime::device_name(device), engine, stats, timings, out);
  }
  return 0;
}

}  // namespace graphed::cli
