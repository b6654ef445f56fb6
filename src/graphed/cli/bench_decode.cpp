// cli/bench_decode.cpp — see cli/bench_decode.h. Each scope gets one serving engine with decode-only
// graph buckets and room for the largest batch; a batch of b is b requests added at once, each decoding
// after its prompt, timed on the host's clock from the first step on which all b decode. The roofline is
// infer/decode_roofline's bytes per step, with each real row's context at the middle of the run
// (prompt + new tokens / 2), divided by the GPU's published memory bandwidth.
#include "graphed/cli/bench_decode.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>

#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include "graphed/capture/capture_memory.h"
#include "graphed/capture/graph_support.h"
#include "graphed/cli/distributed_setup.h"
#include "graphed/cli/quantization.h"
#include "graphed/cli/run_setup.h"
#include "graphed/dist/peer_collectives.h"
#include "graphed/infer/decode_roofline.h"
#include "graphed/infer/serving_engine.h"
#include "graphed/runtime/device.h"
#include "graphed/runtime/peak_throughput.h"
#include "graphed/util/build_info.h"
#include "graphed/util/error.h"
#include "graphed/util/statistics.h"
#include "graphed/util/text.h"

namespace graphed::cli {
namespace {

using config::InferenceCudaGraphScope;

struct DecodeRow {
  std::string scope;
  int64_t batch = 0;
  std::optional<std::string> skipped;
  int64_t rows = 0;
  double ms_per_step = 0;         ///< median over the repeats
  double host_ms_per_step = 0;    ///< of it, the host's own work (infer::EngineStats::host_seconds)
  double device_ms_per_step = 0;  ///< the device's time for a step's work (infer::EngineStats::device_seconds)
  double tokens_per_second = 0;
  double first_token_ms = 0;
  double roofline_share = 0;   ///< 0 when the bandwidth is unknown
  double capture_seconds = 0;  ///< every bucket of the scope
  double graph_pool_mib = 0;
  int64_t graphs = 0;
};

std::vector<std::vector<int64_t>> random_prompts(int64_t batch, int64_t length, int64_t vocab) {
  const at::Tensor ids = at::randint(0, vocab, {batch, length}, at::kLong);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t row = 0; row < batch; ++row) {
    const int64_t* data = ids[row].data_ptr<int64_t>();
    prompts.emplace_back(data, data + length);
  }
  return prompts;
}

/// One batch through the engine: the prompts' steps (to every request's first token), then the steps on
/// which they all decode.
struct BatchRun {
  double first_token_ms = 0;
  double decode_ms = 0;
  double host_ms = 0;    ///< of decode_ms
  double device_ms = 0;  ///< the device's part
  int64_t decode_steps = 0;
  int64_t rows = 0;  ///< the padded decode count of the decode steps
};

BatchRun run_batch(infer::ServingEngine& engine, const std::vector<std::vector<int64_t>>& prompts, int64_t new_tokens) {
  using Clock = std::chrono::steady_clock;
  infer::RequestOptions options;
  options.max_new_tokens = new_tokens;
  const auto start = Clock::now();
  for (const auto& prompt : prompts) engine.add_request(prompt, options);
  const auto batch = static_cast<int64_t>(prompts.size());
  std::map<int64_t, int64_t> drawn;  // by request
  BatchRun run;
  std::optional<Clock::time_point> decoding_since;
  double host_seconds_before = 0, device_seconds_before = 0;
  while (engine.has_work()) {
    const infer::StepResult step = engine.step();
    if (decoding_since) {
      ++run.decode_steps;
      run.rows = step.padded.decode_count;
    }
    for (const auto& token : step.tokens) ++drawn[token.request];
    if (!decoding_since && static_cast<int64_t>(drawn.size()) == batch) {
      decoding_since = Clock::now();
      host_seconds_before = engine.stats().host_seconds;
      device_seconds_before = engine.stats().device_seconds;
      run.first_token_ms = std::chrono::duration<double, std::milli>(*decoding_since - start).count();
    }
  }
  if (decoding_since) {
    run.decode_ms = std::chrono::duration<double, std::milli>(Clock::now() - *decoding_since).count();
    run.host_ms = (engine.stats().host_seconds - host_seconds_before) * 1000.0;
    run.device_ms = (engine.stats().device_seconds - device_seconds_before) * 1000.0;
  }
  return run;
}

infer::ServingOptions decode_engine_options(const CommandLine& command_line, const config::RunConfig& config,
                                            InferenceCudaGraphScope scope) {
  const auto& batches = command_line.decode_batches;
  infer::ServingOptions options;
  options.scope = scope;
  options.max_requests = *std::max_element(batches.begin(), batches.end());
  options.max_sequence = command_line.decode_prompt_tokens + command_line.decode_new_tokens;
  // Every prompt of the largest batch in one step, as a static batch's prefill runs.
  options.max_tokens = std::max(options.max_requests, options.max_requests * command_line.decode_prompt_tokens);
  options.block_size = std::min<int64_t>(256, options.max_sequence);
  // A block table's worth for every request: the same on every rank of a tensor-parallel group, whatever
  // memory each has free, so that they schedule alike.
  options.cache_blocks =
      options.max_requests * ((options.max_sequence + options.block_size - 1) / options.block_size) + 1;
  options.num_cuda_graphs = config.cuda_graph.inference_num_cuda_graphs;
  options.decode_only_cuda_graphs = true;
  return options;
}

std::vector<DecodeRow> skipped_rows(const std::vector<int64_t>& batches, InferenceCudaGraphScope scope,
                                    const std::string& why) {
  std::vector<DecodeRow> rows;
  for (const int64_t batch : batches) {
    DecodeRow row;
    row.scope = config::to_string(scope);
    row.batch = batch;
    row.skipped = why;
    rows.push_back(row);
  }
  return rows;
}

std::vector<DecodeRow> bench_scope(const CommandLine& command_line, model::GptModel& model,
                                   const config::RunConfig& config, InferenceCudaGraphScope scope,
                                   const at::Device& device, double weight_bytes_saved) {
  const auto& batches = command_line.decode_batches;
  const auto why_not = capture::why_graphs_cannot_run(device);
  if (scope != InferenceCudaGraphScope::kNone && why_not) {
    return skipped_rows(batches, scope, "decode graphs cannot run: " + *why_not);
  }
  infer::ServingEngine engine(model, device, decode_engine_options(command_line, config, scope));
  const capture::MemoryMark mark(device);
  engine.capture_graphs();
  runtime::synchronize(device);
  const double pool_mib = static_cast<double>(mark.taken_since().pool_bytes) / (1024.0 * 1024.0);
  const auto bandwidth = runtime::peak_memory_bandwidth(device);
  const int64_t context = command_line.decode_prompt_tokens + command_line.decode_new_tokens / 2;
  std::vector<DecodeRow> rows;
  for (const int64_t batch : batches) {
    at::manual_seed(config.train.seed + batch);
    const auto prompts = random_prompts(batch, command_line.decode_prompt_tokens, config.model.vocab_size);
    run_batch(engine, prompts, command_line.decode_new_tokens);  // warmup
    std::vector<double> step_ms, host_ms, device_ms, first_ms;
    BatchRun last;
    for (int64_t repeat = 0; repeat < 3; ++repeat) {
      last = run_batch(engine, prompts, command_line.decode_new_tokens);
      const auto steps = static_cast<double>(std::max<int64_t>(1, last.decode_steps));
      step_ms.push_back(last.decode_ms / steps);
      host_ms.push_back(last.host_ms / steps);
      device_ms.push_back(last.device_ms / steps);
      first_ms.push_back(last.first_token_ms);
    }
    DecodeRow row;
    row.scope = config::to_string(scope);
    row.batch = batch;
    row.rows = last.rows;
    row.ms_per_step = median(step_ms);
    row.host_ms_per_step = median(host_ms);
    row.device_ms_per_step = median(device_ms);
    row.first_token_ms = median(first_ms);
    row.tokens_per_second = static_cast<double>(batch) / (row.ms_per_step / 1000.0);
    if (bandwidth) {
      const double ideal_ms = infer::decode_bytes_per_step(model, batch, context, weight_bytes_saved) /
                              bandwidth->bytes_per_second * 1000.0;
      row.roofline_share = ideal_ms / row.ms_per_step;
    }
    row.capture_seconds = engine.stats().capture_seconds;
    row.graph_pool_mib = pool_mib;
    row.graphs = engine.graph_count();
    rows.push_back(row);
  }
  return rows;
}

void print_table(const CommandLine& command_line, const config::RunConfig& config, const at::Device& device,
                 at::ScalarType dtype, const std::vector<DecodeRow>& rows, std::ostream& out) {
  const auto bandwidth = runtime::peak_memory_bandwidth(device);
  const int64_t tensor_size = config.train.tensor_model_parallel_size;
  out << "bench --decode: preset " << command_line.preset.value_or("(none)") << " (" << config.model.num_layers
      << " layers, hidden " << config.model.hidden_size << ", vocab " << config.model.vocab_size << "), random "
      << (dtype == at::kBFloat16 ? "bf16" : "fp32") << " weights"
      << (command_line.serving.quantization == "fp8" ? " held in FP8 (--quantization fp8)" : "") << ", "
      << runtime::device_name(device)
      << (tensor_size > 1 ? " x " + std::to_string(tensor_size) + " (tensor parallel; roofline per GPU)" : "") << ", "
      << build_summary() << "; prompt " << command_line.decode_prompt_tokens << " tokens, "
      << command_line.decode_new_tokens
      << " new tokens, greedy, through the serving engine (decode-only graph buckets); median of 3 runs after 1 "
         "warmup; roofline: "
      << (bandwidth ? bandwidth->basis : std::string("unknown bandwidth")) << "\n";
  out << "| scope | batch | rows | ms/step | host ms/step | device ms/step | tokens/s | roofline % | first token ms | "
         "graphs | capture s (all buckets) | graph pool MiB |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    if (r.skipped) {
      out << "| " << r.scope << " | " << r.batch << " | skipped: " << *r.skipped << " |||||||||\n";
      continue;
    }
    const bool eager = r.scope == "none";
    out << "| " << r.scope << " | " << r.batch << " | " << r.rows << " | " << fixed_decimals(r.ms_per_step, 3) << " | "
        << fixed_decimals(r.host_ms_per_step, 3) << " | " << fixed_decimals(r.device_ms_per_step, 3) << " | "
        << fixed_decimals(r.tokens_per_second, 0) << " | "
        << (r.roofline_share > 0 ? fixed_decimals(100.0 * r.roofline_share, 1) : "-") << " | "
        << fixed_decimals(r.first_token_ms, 2) << " | " << r.graphs << " | "
        << (eager ? "-" : fixed_decimals(r.capture_seconds, 3)) << " | "
        << (eager ? "-" : fixed_decimals(r.graph_pool_mib, 1)) << " |\n";
  }
}

void print_json(const CommandLine& command_line, const at::Device& device, const std::vector<DecodeRow>& rows,
                std::ostream& out) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json item{{"mode", "decode"},
                        {"scope", r.scope},
                        {"batch", r.batch},
                        {"preset", command_line.preset.value_or("")},
                        {"quantization", command_line.serving.quantization},
                        {"device", runtime::device_name(device)}};
    if (r.skipped) {
      item["skipped"] = *r.skipped;
    } else {
      item.update({{"rows", r.rows},
                   {"ms_per_step", r.ms_per_step},
                   {"host_ms_per_step", r.host_ms_per_step},
                   {"device_ms_per_step", r.device_ms_per_step},
                   {"tokens_per_s", r.tokens_per_second},
                   {"roofline_share", r.roofline_share},
                   {"first_token_ms", r.first_token_ms},
                   {"graphs", r.graphs},
                   {"capture_s", r.capture_seconds},
                   {"graph_pool_mib", r.graph_pool_mib},
                   {"prompt_tokens", command_line.decode_prompt_tokens},
                   {"new_tokens", command_line.decode_new_tokens}});
    }
    array.push_back(item);
  }
  out << array.dump(2) << "\n";
}

}  // namespace

int run_bench_decode(const CommandLine& command_line, std::ostream& out) {
  const dist::LaunchEnvironment environment = launch_environment();
  config::Settings settings = command_line.settings;
  settings.model.attention_dropout = 0.0;
  settings.model.hidden_dropout = 0.0;
  settings.train.mock_data = true;
  settings.train.world_size = environment.is_distributed() ? environment.world_size : 1;
  const config::RunConfig config = resolve_settings(settings);
  // Every rank of a tensor-parallel launch decodes the same batch with its part of the model.
  require_one_tensor_group(environment, config.train.tensor_model_parallel_size, "graphed bench --decode");
  const at::Device device =
      device_for_rank(choose_device(config.train.device, "decoding eagerly in fp32"), environment);
  const int64_t context = config.model.max_position_embeddings.value_or(config.model.seq_length);
  if (command_line.decode_prompt_tokens + command_line.decode_new_tokens > context) {
    throw ConfigError("--decode-prompt-tokens " + std::to_string(command_line.decode_prompt_tokens) +
                      " + --decode-new-tokens " + std::to_string(command_line.decode_new_tokens) +
                      " exceed the model's context of " + std::to_string(context) + "; fix: lower them");
  }
  at::manual_seed(config.train.seed);
  model::GptModel model(config.model, config.moe_layers);
  std::optional<DistributedRun> distributed;
  if (environment.is_distributed()) {  // each rank keeps its part of the model every rank built
    distributed.emplace(config, environment, device);
    model->split_for_tensor_parallel(dist::make_inference_collectives(distributed->groups().tensor(), device,
                                                                      !command_line.disable_custom_all_reduce));
    distributed->groups().tensor().barrier();  // the group's first collective, outside any graph capture
  }
  std::ostream& print = environment.rank == 0 ? out : null_stream();
  const at::ScalarType dtype = device.is_cuda() ? at::kBFloat16 : at::kFloat;
  model->to(device, dtype);
  model->eval();
  at::NoGradGuard no_grad;
  const auto fp8 = apply_quantization(command_line.serving.quantization, model, device,
                                      environment.rank == 0 ? std::cerr : null_stream());
  const double bytes_saved = fp8 ? static_cast<double>(fp8->replaced_bytes() - fp8->fp8_bytes()) : 0.0;
  std::vector<DecodeRow> rows;
  for (const auto& name : command_line.decode_scopes) {
    const InferenceCudaGraphScope scope = *config::parse_inference_cuda_graph_scope(name);
    for (auto& row : bench_scope(command_line, model, config, scope, device, bytes_saved)) rows.push_back(row);
  }
  if (command_line.json_output) {
    print_json(command_line, device, rows, print);
  } else {
    print_table(command_line, config, device, dtype, rows, print);
  }
  if (distributed) distributed->finish();
  return 0;
}

}  // namespace graphed::cli
