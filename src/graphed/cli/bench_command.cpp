// cli/bench_command.cpp — see cli/bench_command.h. Benchmarks report; they never fail on speed.
#include "graphed/cli/bench_command.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "graphed/capture/op_counter.h"
#include "graphed/cli/bench_decode.h"
#include "graphed/cli/bench_serve.h"
#include "graphed/cli/quantization.h"
#include "graphed/cli/run_setup.h"
#include "graphed/config/presets.h"
#include "graphed/runtime/device.h"
#include "graphed/runtime/precision.h"
#include "graphed/train/trainer.h"
#include "graphed/util/build_info.h"
#include "graphed/util/error.h"
#include "graphed/util/logging.h"
#include "graphed/util/statistics.h"
#include "graphed/util/text.h"

namespace graphed::cli {
namespace {

struct Row {
  std::string impl;
  std::optional<std::string> skipped;     ///< why this build or machine cannot time the impl
  double ms_per_iteration = 0;            ///< median of synchronized iterations (CUDA events)
  double host_ms_per_iteration = 0;       ///< time to enqueue one iteration, without waiting for the GPU
  double pipelined_ms_per_iteration = 0;  ///< iterations back to back, no synchronization between them
  int64_t ops_per_iteration = 0;          ///< ATen operators dispatched by one iteration
  double tokens_per_second = 0;           ///< from the pipelined time, as training runs
  std::optional<double> mfu;              ///< model FLOPs (Trainer::flops_per_iteration) / peak, pipelined
  double speedup = 1;
  double capture_seconds = 0;
  double peak_mib = 0;
  double reserved_mib = 0;  ///< device memory reserved after the timed loop (graph pools included)
  double graph_pool_mib = 0;
  double graph_mib = 0;  ///< device memory of the graphs themselves, outside the allocator
  int64_t graphs = 0;
  double loss = 0;
};

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

/// impl: a --cuda-graph-impl value; "full_iteration+optimizer" (with --optimizer-cuda-graph); or
/// "IMPL:MODULE+MODULE" (a per-layer impl with those --cuda-graph-modules, e.g.
/// transformer_engine:attn+mlp). A plain per-layer impl keeps the command line's modules.
config::RunConfig row_config(const CommandLine& command_line, const std::string& impl) {
  CommandLine line = command_line;
  const bool optimizer_inside = impl == "full_iteration+optimizer";
  const std::size_t colon = impl.find(':');
  line.settings.cuda_graph.impl = optimizer_inside ? "full_iteration" : impl.substr(0, colon);
  if (colon != std::string::npos) line.settings.cuda_graph.modules = split(impl.substr(colon + 1), '+');
  line.settings.cuda_graph.optimizer_cuda_graph = optimizer_inside;
  line.settings.train.mock_data = true;
  line.settings.train.data_path.reset();
  line.settings.train.eval_iters = 0;
  line.settings.train.save.reset();
  line.settings.train.load.reset();
  line.settings.train.metrics_file.reset();
  line.settings.train.train_iters =
      std::max<int64_t>(line.settings.train.train_iters, command_line.bench_warmup + 2 * command_line.bench_iters + 10);
  if (auto note = config::fit_preset_warmup(line.settings, line.origins)) log_info("note: " + *note);
  return resolve_settings(line.settings);
}

/// Synchronized iterations: each timed alone with CUDA events (and the host's enqueue time); the
/// row's loss is the last one's.
void time_synchronized(train::Trainer& trainer, int64_t iterations, int64_t& iteration, const at::Device& device,
                       Row& row) {
  train::IterationStats last;
  std::vector<double> times, host_times;
  runtime::DeviceTimer timer(device);
  for (int64_t i = 0; i < iterations; ++i, ++iteration) {
    const auto host_start = std::chrono::steady_clock::now();
    timer.start();
    last = trainer.train_step(iteration);
    timer.stop();
    host_times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start).count());
    times.push_back(timer.elapsed_ms());
  }
  row.ms_per_iteration = median(times);
  row.host_ms_per_iteration = median(host_times);
  row.loss = last.loss.item<double>();
}

/// Pipelined iterations: enqueued back to back as training runs them; one event pair around all.
void time_pipelined(train::Trainer& trainer, int64_t iterations, int64_t& iteration, const at::Device& device,
                    Row& row) {
  runtime::synchronize(device);
  runtime::DeviceTimer timer(device);
  timer.start();
  for (int64_t i = 0; i < iterations; ++i, ++iteration) trainer.train_step(iteration);
  timer.stop();
  row.pipelined_ms_per_iteration = timer.elapsed_ms() / static_cast<double>(iterations);
}

Row bench_impl(const CommandLine& command_line, const std::string& impl) {
  const config::RunConfig config = row_config(command_line, impl);
  const at::Device device = choose_device(config.train.device);
  try {
    require_available_impl(config, device);
  } catch (const ConfigError& error) {  // a GPU-only row on the CPU: skipped, the others still run
    Row row;
    row.impl = impl;
    row.skipped = error.what();
    return row;
  }
  runtime::synchronize(device);
  runtime::empty_cache(device);  // the previous row's cached blocks must not count here
  train::Trainer trainer(config, train::TokenDataset::open(config.train, config.model, "", 0), device);
  // Warm up past the capture, so that timing sees only replays.
  const int64_t warmup = std::max<int64_t>(command_line.bench_warmup, config.cuda_graph.warmup_steps + 2);
  int64_t iteration = 0;
  for (; iteration < warmup; ++iteration) trainer.train_step(iteration);
  runtime::synchronize(device);
  runtime::reset_peak_memory(device);
  Row row;
  row.impl = impl;
  time_synchronized(trainer, command_line.bench_iters, iteration, device, row);
  time_pipelined(trainer, command_line.bench_iters, iteration, device, row);
  row.ops_per_iteration = capture::count_dispatched_ops([&] { trainer.train_step(iteration++); });
  if (command_line.profile_iterations > 0) {
    runtime::synchronize(device);
    runtime::ProfilerRange range(device);
    for (int64_t i = 0; i < command_line.profile_iterations; ++i, ++iteration) trainer.train_step(iteration);
    runtime::synchronize(device);
  }
  const double tokens = trainer.tokens_per_iteration();
  row.tokens_per_second = tokens / (row.pipelined_ms_per_iteration / 1000.0);
  if (trainer.peak()) {
    row.mfu =
        trainer.flops_per_iteration() / (row.pipelined_ms_per_iteration / 1000.0) / trainer.peak()->flops_per_second;
  }
  row.peak_mib = mib(runtime::peak_memory_bytes(device));
  row.reserved_mib = mib(runtime::reserved_memory_bytes(device));
  row.graphs = trainer.runner().graph_count();
  if (const auto report = trainer.runner().capture_report()) {
    row.capture_seconds = report->seconds;
    row.graph_pool_mib = mib(report->memory.pool_bytes);
    row.graph_mib = mib(report->memory.graph_bytes);
  }
  return row;
}

void print_table(const CommandLine& command_line, const config::RunConfig& config, const at::Device& device,
                 const std::vector<Row>& rows, std::ostream& out) {
  out << "bench: preset " << command_line.preset.value_or("(none)") << ", " << runtime::device_name(device) << ", "
      << build_summary() << ", " << command_line.bench_warmup << " warmup + " << command_line.bench_iters
      << " synchronized (median) + " << command_line.bench_iters << " pipelined iterations, global batch "
      << config.train.global_batch_size.value_or(1) << " x seq " << config.model.seq_length << ", "
      << runtime::describe(runtime::choose_precision(config.model.bf16, device)) << "\n";
  out << "| impl | ms/iter | pipelined ms/iter | host ms/iter | aten ops/iter | tokens/s | MFU | speedup vs none | "
         "graphs | "
         "capture s | peak MiB | reserved MiB | graph pool MiB | graphs MiB | loss |\n";
  out << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    if (r.skipped) {
      out << "| " << r.impl << " | skipped: " << *r.skipped << " ||||||||||||||\n";
      continue;
    }
    const bool eager = r.impl == "none";
    out << "| " << r.impl << " | " << fixed_decimals(r.ms_per_iteration, 3) << " | "
        << fixed_decimals(r.pipelined_ms_per_iteration, 3) << " | " << fixed_decimals(r.host_ms_per_iteration, 3)
        << " | " << r.ops_per_iteration << " | " << fixed_decimals(r.tokens_per_second, 0) << " | "
        << (r.mfu ? fixed_decimals(100.0 * *r.mfu, 1) + "%" : "-") << " | " << fixed_decimals(r.speedup, 2) << " | "
        << r.graphs << " | " << (eager ? "-" : fixed_decimals(r.capture_seconds, 2)) << " | "
        << fixed_decimals(r.peak_mib, 1) << " | " << fixed_decimals(r.reserved_mib, 1) << " | "
        << (eager ? "-" : fixed_decimals(r.graph_pool_mib, 1)) << " | "
        << (eager ? "-" : fixed_decimals(r.graph_mib, 1)) << " | " << fixed_decimals(r.loss, 4) << " |\n";
  }
}

void print_json(const CommandLine& command_line, const at::Device& device, const std::vector<Row>& rows,
                std::ostream& out) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& r : rows) {
    if (r.skipped) {
      array.push_back({{"impl", r.impl},
                       {"skipped", *r.skipped},
                       {"preset", command_line.preset.value_or("")},
                       {"device", runtime::device_name(device)}});
      continue;
    }
    array.push_back({{"impl", r.impl},
                     {"ms_per_iter", r.ms_per_iteration},
                     {"pipelined_ms_per_iter", r.pipelined_ms_per_iteration},
                     {"host_ms_per_iter", r.host_ms_per_iteration},
                     {"ops_per_iter", r.ops_per_iteration},
                     {"tokens_per_s", r.tokens_per_second},
                     {"mfu", r.mfu ? nlohmann::json(*r.mfu) : nlohmann::json(nullptr)},
                     {"speedup_vs_none", r.speedup},
                     {"graphs", r.graphs},
                     {"capture_s", r.capture_seconds},
                     {"peak_mib", r.peak_mib},
                     {"reserved_mib", r.reserved_mib},
                     {"graph_pool_mib", r.graph_pool_mib},
                     {"graph_mib", r.graph_mib},
                     {"loss", r.loss},
                     {"preset", command_line.preset.value_or("")},
                     {"device", runtime::device_name(device)},
                     {"iters", command_line.bench_iters},
                     {"warmup", command_line.bench_warmup}});
  }
  out << array.dump(2) << "\n";
}

}  // namespace

int run_bench(const CommandLine& command_line, std::ostream& out) {
  if (command_line.bench_decode && command_line.serve_bench.serve) {
    throw ConfigError("bench was given both --decode and --serve; fix: give one of them");
  }
  const bool decodes = command_line.bench_decode || command_line.serve_bench.serve;
  const auto& fp8 = command_line.settings.model.fp8_format;
  if (decodes && fp8) {
    throw ConfigError("--fp8-format " + *fp8 + " trains in FP8, but bench " +
                      (command_line.bench_decode ? "--decode" : "--serve") +
                      " decodes; fix: give --quantization fp8 for FP8 weights in decoding, and drop --fp8-format");
  }
  check_quantization(command_line.serving.quantization);
  if (!decodes && command_line.serving.quantization != "none") {
    throw ConfigError("--quantization " + command_line.serving.quantization +
                      " holds weights in FP8 for decoding, but bench times training here; fix: add --decode or "
                      "--serve, or give --fp8-format hybrid to train in FP8");
  }
  if (command_line.serve_bench.serve) return run_bench_serve(command_line, out);
  refuse_serve_flags_without_serve(command_line);
  if (command_line.bench_decode) return run_bench_decode(command_line, out);
  refuse_multi_process_launch("bench");
  std::vector<Row> rows;
  for (const auto& impl : command_line.impls) rows.push_back(bench_impl(command_line, impl));
  const auto baseline = std::find_if(rows.begin(), rows.end(), [](const Row& r) { return r.impl == "none"; });
  for (auto& row : rows) {
    if (!row.skipped) row.speedup = baseline != rows.end() ? baseline->ms_per_iteration / row.ms_per_iteration : 1.0;
  }
  const config::RunConfig config = config::resolve_run_config_or_throw(command_line.settings);
  const at::Device device =
      config.train.device == "cpu" || !runtime::cuda_available() ? at::Device(at::kCPU) : at::Device(at::kCUDA, 0);
  if (command_line.json_output) {
    print_json(command_line, device, rows, out);
  } else {
    print_table(command_line, config, device, rows, out);
  }
  return 0;
}

}  // namespace graphed::cli
