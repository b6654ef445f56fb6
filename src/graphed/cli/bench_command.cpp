// cli/bench_command.cpp — see cli/bench_command.h. Benchmarks report; they never fail on speed.
#include "graphed/cli/bench_command.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "graphed/capture/device.h"
#include "graphed/capture/op_counter.h"
#include "graphed/cli/run_setup.h"
#include "graphed/train/trainer.h"
#include "graphed/util/build_info.h"
#include "graphed/util/error.h"
#include "graphed/util/text.h"

namespace graphed::cli {
namespace {

struct Row {
  std::string impl;
  double ms_per_iteration = 0;
  double host_ms_per_iteration = 0;  ///< time to enqueue one iteration, without waiting for the GPU
  int64_t ops_per_iteration = 0;     ///< ATen operators dispatched by one iteration
  double tokens_per_second = 0;
  double speedup = 1;
  double capture_seconds = 0;
  double peak_mib = 0;
  double reserved_mib = 0;  ///< device memory reserved after the timed loop (graph pools included)
  double graph_pool_mib = 0;
  double loss = 0;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// impl: a --cuda-graph-impl value; "full_iteration+optimizer" (with --optimizer-cuda-graph); or
/// "IMPL:MODULE+MODULE" (a per-layer impl with those --cuda-graph-modules, e.g.
/// transformer_engine:attn+mlp). A plain per-layer impl keeps the command line's modules.
Row bench_impl(const CommandLine& command_line, const std::string& impl) {
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
  line.settings.train.train_iters = std::max<int64_t>(line.settings.train.train_iters,
                                                      command_line.bench_warmup + command_line.bench_iters + 10);
  const config::RunConfig config = resolve_for_run(line);
  const at::Device device = choose_device(config.train.device);
  require_available_impl(config, device);
  capture::synchronize(device);
  capture::empty_cache(device);  // the previous row's cached blocks must not count here
  train::Trainer trainer(config, train::TokenDataset::open(config.train, config.model, "", 0), device);
  // Warm up past the capture, so that timing sees only replays.
  const int64_t warmup = std::max<int64_t>(command_line.bench_warmup, config.cuda_graph.warmup_steps + 2);
  int64_t iteration = 0;
  for (; iteration < warmup; ++iteration) trainer.train_step(iteration);
  capture::synchronize(device);
  capture::reset_peak_memory(device);
  std::vector<double> times, host_times;
  train::IterationStats last;
  capture::DeviceTimer timer(device);
  for (int64_t i = 0; i < command_line.bench_iters; ++i, ++iteration) {
    const auto host_start = std::chrono::steady_clock::now();
    timer.start();
    last = trainer.train_step(iteration);
    timer.stop();
    host_times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start).count());
    times.push_back(timer.elapsed_ms());
  }
  Row row;
  row.impl = impl;
  row.ms_per_iteration = median(times);
  row.host_ms_per_iteration = median(host_times);
  row.ops_per_iteration = capture::count_dispatched_ops([&] { trainer.train_step(iteration); });
  const double tokens = static_cast<double>(config.train.global_batch_size.value_or(1) * config.model.seq_length);
  row.tokens_per_second = tokens / (row.ms_per_iteration / 1000.0);
  row.peak_mib = static_cast<double>(capture::peak_memory_bytes(device)) / (1024.0 * 1024.0);
  row.reserved_mib = static_cast<double>(capture::reserved_memory_bytes(device)) / (1024.0 * 1024.0);
  row.loss = last.loss.item<double>();
  if (const auto* graph = trainer.training_graph()) {
    row.capture_seconds = graph->capture_seconds();
    row.graph_pool_mib = static_cast<double>(graph->pool_bytes()) / (1024.0 * 1024.0);
  }
  if (const auto* layers = trainer.layer_graphs()) {
    row.capture_seconds = layers->capture_seconds();
    row.graph_pool_mib = static_cast<double>(layers->pool_bytes()) / (1024.0 * 1024.0);
  }
  return row;
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

}  // namespace

int run_bench(const CommandLine& command_line, std::ostream& out) {
  std::vector<Row> rows;
  for (const auto& impl : command_line.impls) rows.push_back(bench_impl(command_line, impl));
  const auto baseline = std::find_if(rows.begin(), rows.end(), [](const Row& r) { return r.impl == "none"; });
  for (auto& row : rows) row.speedup = baseline != rows.end() ? baseline->ms_per_iteration / row.ms_per_iteration : 1.0;
  const config::RunConfig config = config::resolve_run_config_or_throw(command_line.settings);
  const at::Device device = config.train.device == "cpu" || !capture::cuda_available() ? at::Device(at::kCPU)
                                                                                        : at::Device(at::kCUDA, 0);
  if (command_line.json_output) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& r : rows) {
      array.push_back({{"impl", r.impl}, {"ms_per_iter", r.ms_per_iteration}, {"host_ms_per_iter", r.host_ms_per_iteration}, {"ops_per_iter", r.ops_per_iteration}, {"tokens_per_s", r.tokens_per_second},
                       {"speedup_vs_none", r.speedup}, {"capture_s", r.capture_seconds}, {"peak_mib", r.peak_mib}, {"reserved_mib", r.reserved_mib},
                       {"graph_pool_mib", r.graph_pool_mib}, {"loss", r.loss}, {"preset", command_line.preset.value_or("")},
                       {"device", capture::device_name(device)}, {"iters", command_line.bench_iters},
                       {"warmup", command_line.bench_warmup}});
    }
    out << array.dump(2) << "\n";
    return 0;
  }
  out << "bench: preset " << command_line.preset.value_or("(none)") << ", " << capture::device_name(device) << ", "
      << build_summary() << ", " << command_line.bench_warmup << " warmup + " << command_line.bench_iters
      << " timed iterations (median), global batch " << config.train.global_batch_size.value_or(1) << " x seq "
      << config.model.seq_length << (config.model.bf16 && device.is_cuda() ? ", bf16 autocast" : ", fp32") << "\n";
  out << "| impl | ms/iter | host ms/iter | aten ops/iter | tokens/s | speedup vs none | capture s | peak MiB | reserved MiB | graph pool MiB | loss |\n";
  out << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    out << "| " << r.impl << " | " << fixed(r.ms_per_iteration, 3) << " | " << fixed(r.host_ms_per_iteration, 3) << " | " << r.ops_per_iteration << " | " << fixed(r.tokens_per_second, 0) << " | "
        << fixed(r.speedup, 2) << " | " << (r.impl == "none" ? "-" : fixed(r.capture_seconds, 2)) << " | "
        << fixed(r.peak_mib, 1) << " | " << fixed(r.reserved_mib, 1) << " | " << (r.impl == "none" ? "-" : fixed(r.graph_pool_mib, 1)) << " | "
        << fixed(r.loss, 4) << " |\n";
  }
  return 0;
}

}  // namespace graphed::cli
