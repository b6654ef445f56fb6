// cli/train_command.cpp — see cli/train_command.h.
#include "graphed/cli/train_command.h"

#include <iomanip>

#include "graphed/capture/device.h"
#include "graphed/cli/distributed_setup.h"
#include "graphed/cli/run_setup.h"
#include "graphed/train/memory_estimate.h"
#include "graphed/train/trainer.h"
#include "graphed/util/error.h"
#include "graphed/util/logging.h"
#include "graphed/util/text.h"

namespace graphed::cli {
namespace {

void print_model_line(const config::RunConfig& config, train::Trainer& trainer, const at::Device& device,
                      std::ostream& out) {
  int64_t parameters = 0;
  for (const auto& parameter : trainer.model()->parameters()) parameters += parameter.numel();
  out << "model: " << config.model.num_layers << " layers, hidden " << config.model.hidden_size << ", "
      << group_thousands(static_cast<double>(parameters)) << " parameters" << (config.model.is_moe() ? " (MoE)" : "")
      << (config.model.is_hybrid_model ? ", hybrid layers " + config.model.hybrid_override_pattern.value_or("") : "")
      << "; device: " << capture::device_name(device)
      << (config.model.bf16 && device.is_cuda() ? ", bf16 autocast" : ", fp32") << "; "
      << config.num_microbatches() << " microbatch(es) of " << config.train.micro_batch_size << " x "
      << config.model.seq_length << " tokens per iteration";
  if (config.train.data_parallel_size.value_or(1) > 1) {
    out << " and rank (global batch " << *config.train.global_batch_size << " over "
        << *config.train.data_parallel_size << " data-parallel ranks)";
  }
  out << std::endl;
  if (trainer.peak()) out << "MFU is measured against " << trainer.peak()->basis << std::endl;
}

void print_summary(const train::TrainSummary& summary, std::ostream& out) {
  out << "done: " << summary.last_iteration << " iterations";
  if (summary.seconds > 0.0) {
    out << " in " << std::fixed << std::setprecision(1) << summary.seconds << " s, "
        << group_thousands(summary.tokens) << " tokens at " << group_thousands(summary.tokens / summary.seconds)
        << " tokens/s";
  }
  if (!summary.intervals.empty()) {
    out << ", final loss " << std::fixed << std::setprecision(4) << summary.intervals.back().loss;
  }
  out << std::defaultfloat << std::endl;
}

/// Refuses a run whose estimated memory exceeds what the device has free; warns above 80%.
void check_memory(const config::RunConfig& config, const at::Device& device) {
  const auto available = capture::available_memory_bytes(device);
  if (!available) return;
  const std::string where = device.is_cuda() ? capture::device_name(device) : "this machine (host memory)";
  const bool autocast = config.model.bf16 && device.is_cuda();
  if (const auto warning = train::check_memory_fits(config, autocast, *available, where)) log_warn(*warning);
}

/// Builds the trainer, loads --load, trains and prints the summary (rank 0 prints; the others' `out`
/// drops everything).
int train_rank(const config::RunConfig& config, const at::Device& device, dist::ProcessGroups* groups,
               std::ostream& out) {
  train::TokenDataset data =
      train::TokenDataset::open(config.train, config.model, default_corpus_path(), config.train.eval_iters);
  out << "data: " << data.description() << " (format: " << data.format_description() << ")" << std::endl;
  train::Trainer trainer(config, std::move(data), device, groups);
  print_model_line(config, trainer, device, out);
  if (config.train.sample_tokens > 0 && !trainer.data().is_byte_level()) {
    out << "note: no samples: graphed reads text only through its byte-level tokenizer, and this data is token "
           "ids (pass text or a folder of .txt to --data-path to see samples)" << std::endl;
  }
  if (config.train.load) {
    trainer.load(*config.train.load);
    out << "resumed from " << *config.train.load << " at iteration " << trainer.start_iteration() << std::endl;
    if (trainer.start_iteration() >= config.train.train_iters) {
      out << "nothing to train: the checkpoint is at iteration " << trainer.start_iteration() << " and --train-iters is "
          << config.train.train_iters << "; to go on, pass a larger --train-iters (e.g. --train-iters "
          << trainer.start_iteration() + config.train.train_iters << ")" << std::endl;
      return 0;
    }
  }
  const train::TrainSummary summary = trainer.train(out);
  if (config.train.eval_iters == 0) {  // evaluations sample on their own, the last one included
    if (const auto text = trainer.sample(summary.last_iteration)) out << "sample: " << *text << std::endl;
  }
  print_summary(summary, out);
  return 0;
}

}  // namespace

int run_train(const CommandLine& command_line, std::ostream& out) {
  const dist::LaunchEnvironment environment = launch_environment();
  std::ostream& print = environment.rank == 0 ? out : null_stream();
  const config::RunConfig config = resolve_for_run(command_line, print, environment.world_size);
  const at::Device device = device_for_rank(choose_device(config.train.device), environment);
  require_available_impl(config, device);
  check_memory(config, device);
  if (!environment.is_distributed()) return train_rank(config, device, nullptr, out);
  DistributedRun distributed(config, environment, device);
  print << "launch: " << environment.world_size << " ranks (data-parallel " << *config.train.data_parallel_size
        << " x pipeline " << config.train.pipeline_model_parallel_size << "), " << (device.is_cuda() ? "NCCL" : "Gloo")
        << "; rank 0 prints and writes" << std::endl;
  try {
    const int status = train_rank(config, device, &distributed.groups(), print);
    distributed.finish();
    return status;
  } catch (const DistributedError& error) {
    // A collective fails here when another rank went away: its own error is the cause worth printing.
    if (const auto cause = distributed.failure_of_another_rank()) {
      throw DistributedError("rank " + std::to_string(environment.rank) + " is stopping because " + *cause);
    }
    distributed.report_failure(error.what());
    throw;
  } catch (const std::exception& error) {
    distributed.report_failure(error.what());  // the other ranks stop instead of waiting for this one
    throw;
  }
}

}  // namespace graphed::cli
