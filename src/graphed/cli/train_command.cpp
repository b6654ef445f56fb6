// cli/train_command.cpp — see cli/train_command.h.
#include "graphed/cli/train_command.h"

#include <algorithm>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "graphed/cli/distributed_setup.h"
#include "graphed/cli/run_setup.h"
#include "graphed/config/config_file.h"
#include "graphed/runtime/device.h"
#include "graphed/runtime/precision.h"
#include "graphed/train/event_log.h"
#include "graphed/train/memory_estimate.h"
#include "graphed/train/trainer.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/logging.h"
#include "graphed/util/stop_signals.h"
#include "graphed/util/text.h"

namespace graphed::cli {
namespace {

void print_model_line(const config::RunConfig& config, train::Trainer& trainer, const at::Device& device,
                      train::EventLog& log) {
  const int64_t parameters = trainer.whole_parameter_count();
  std::ostringstream line;
  line << "model: " << config.model.num_layers << " layers, hidden " << config.model.hidden_size << ", "
       << group_thousands(static_cast<double>(parameters)) << " parameters" << (config.model.is_moe() ? " (MoE)" : "")
       << (config.model.is_hybrid_model ? ", hybrid layers " + config.model.hybrid_override_pattern.value_or("") : "")
       << "; device: " << runtime::device_name(device) << ", " << runtime::describe(trainer.precision()) << "; "
       << config.num_microbatches() << " microbatch(es) of " << config.train.micro_batch_size << " x "
       << config.model.seq_length << " tokens per iteration";
  const int64_t data_parallel = config.train.data_parallel_size.value_or(1);
  if (data_parallel > 1) {
    line << " and rank (global batch " << *config.train.global_batch_size << " over " << data_parallel
         << " data-parallel ranks)";
  }
  const int64_t tensor_size = config.train.tensor_model_parallel_size;
  if (tensor_size > 1) line << "; each of " << tensor_size << " tensor-parallel ranks holds its part of every layer";
  const int64_t expert_size = config.train.expert_model_parallel_size;
  if (expert_size > 1) line << "; each of " << expert_size << " expert-parallel ranks holds its share of the experts";
  nlohmann::json fields{{"layers", config.model.num_layers},
                        {"hidden_size", config.model.hidden_size},
                        {"parameters", parameters},
                        {"device", runtime::device_name(device)},
                        {"precision", runtime::describe(trainer.precision())},
                        {"microbatches", config.num_microbatches()},
                        {"micro_batch_size", config.train.micro_batch_size},
                        {"seq_length", config.model.seq_length},
                        {"global_batch_size", *config.train.global_batch_size},
                        {"data_parallel_size", data_parallel}};
  if (trainer.peak()) {
    line << "\nMFU is measured against " << trainer.peak()->basis;
    fields["mfu_basis"] = trainer.peak()->basis;
  }
  log.print("model", fields, line.str());
}

/// "done: 300 iterations (301 to 600) in 7.8 s, 153,600 tokens at 19,692 tokens/s, final loss 1.6329, peak memory
/// 1234 MiB, fp32 parameters 440.0 MiB and Adam moments 880.0 MiB": this run's work (the peak on a GPU only) and the
/// optimizer's state this rank keeps; the iterations before a resume are named, not counted.
void print_summary(const train::TrainSummary& summary, train::EventLog& log) {
  const int64_t iterations = summary.last_iteration - summary.first_iteration;
  std::ostringstream line;
  line << "done: " << iterations << " iterations";
  if (summary.first_iteration > 0) {
    line << " (" << summary.first_iteration + 1 << " to " << summary.last_iteration << ")";
  }
  nlohmann::json fields{{"iterations", iterations},
                        {"first_iteration", summary.first_iteration + 1},
                        {"last_iteration", summary.last_iteration},
                        {"seconds", summary.seconds},
                        {"tokens", summary.tokens},
                        {"stopped", summary.stopped}};
  if (summary.seconds > 0.0) {
    line << " in " << std::fixed << std::setprecision(1) << summary.seconds << " s, " << group_thousands(summary.tokens)
         << " tokens at " << group_thousands(summary.tokens / summary.seconds) << " tokens/s";
    fields["tokens_per_s"] = summary.tokens / summary.seconds;
  }
  if (!summary.intervals.empty()) {
    line << ", final loss " << std::fixed << std::setprecision(4) << summary.intervals.back().loss;
    fields["final_loss"] = summary.intervals.back().loss;
  }
  if (!summary.validation_losses.empty()) fields["final_valid_loss"] = summary.validation_losses.back().second;
  if (summary.peak_memory_bytes > 0) {
    const double mib = static_cast<double>(summary.peak_memory_bytes) / (1 << 20);
    line << ", peak memory " << std::fixed << std::setprecision(1) << mib << " MiB";
    fields["peak_memory_mib"] = mib;
  }
  if (summary.paged_stash_bytes > 0) {
    const double mib = static_cast<double>(summary.paged_stash_bytes) / (1 << 20);
    line << " (paged stash " << std::fixed << std::setprecision(1) << mib << " MiB)";
    fields["paged_stash_mib"] = mib;
  }
  if (summary.adam_moment_bytes > 0) {
    const double mib = static_cast<double>(summary.adam_moment_bytes) / (1 << 20);
    const double masters = static_cast<double>(summary.master_bytes) / (1 << 20);
    line << ", fp32 parameters " << std::fixed << std::setprecision(1) << masters << " MiB and Adam moments " << mib
         << " MiB";
    fields["adam_moments_mib"] = mib;
    fields["fp32_parameters_mib"] = masters;
  }
  log.print("done", fields, line.str());
}

/// A word of a shell command, quoted where the shell would split or expand it.
std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_./=:,+-@%") == std::string::npos;
  if (plain) return word;
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

/// How the resume command starts: graphed alone, or under torchrun as this launch was (several nodes also need
/// their rendezvous flags, which the command cannot know: it says so).
std::string launcher_of(const dist::LaunchEnvironment& environment) {
  if (!environment.is_distributed()) return "graphed train";
  std::string launcher = "torchrun --nproc-per-node " + std::to_string(environment.local_world_size);
  const int64_t nodes = environment.world_size / std::max<int64_t>(1, environment.local_world_size);
  if (nodes > 1) launcher += " --nnodes " + std::to_string(nodes) + " <this launch's rendezvous flags>";
  return launcher + " --no-python graphed train";
}

/// The value a setting was given by the command line's sources (the last that set it, in either spelling of its
/// key), or null.
const nlohmann::json* given_value(const CommandLine& command_line, const config::SettingSpec& spec) {
  const nlohmann::json* given = nullptr;
  for (const auto& source : command_line.sources) {
    for (const auto& [key, value] : source.values.items()) {
      if (config::find_setting(key) == &spec) given = &value;
    }
  }
  return given != nullptr && !given->is_null() ? given : nullptr;
}

/// The command that goes on from this run's checkpoints as this run would have: --load of its --save folder,
/// and every setting the checkpoint does not bring back (the launch's: --save, --save-interval,
/// --metrics-file, --device, the parallel layout; and the CUDA-graph settings) that this run was given.
std::string resume_command(const CommandLine& command_line, const dist::LaunchEnvironment& environment) {
  std::string command = launcher_of(environment) + " --load " + shell_word(*command_line.settings.train.save);
  for (const auto& spec : config::setting_specs()) {
    if (spec.key == "load" || !(config::is_launch_setting(spec.key) || spec.section == "cuda_graph")) continue;
    const nlohmann::json* given = given_value(command_line, spec);
    if (given == nullptr) continue;
    if (spec.kind == config::SettingKind::kBool) {
      command += given->get<bool>() ? " " + spec.flag() : " --no-" + spec.flag().substr(2);
    } else if (spec.kind == config::SettingKind::kList || spec.kind == config::SettingKind::kChoiceList) {
      const nlohmann::json items = config::check_setting_value(spec, *given, spec.key);  // a list, also from "a,b"
      if (items.empty()) continue;
      command += " " + spec.flag();
      for (const auto& item : items) command += " " + shell_word(item.get<std::string>());
    } else {
      command += " " + spec.flag() + " " + shell_word(config::setting_value_text(*given));
    }
  }
  return command;
}

/// After a stop request: what was saved and the command that goes on from there.
void print_stop(const train::TrainSummary& summary, const config::RunConfig& config, const std::string& signal,
                const std::string& resume, train::EventLog& log) {
  std::string line = "stopped by " + signal + " after iteration " + std::to_string(summary.last_iteration) + " of " +
                     std::to_string(config.train.train_iters);
  nlohmann::json fields{
      {"signal", signal}, {"iteration", summary.last_iteration}, {"train_iters", config.train.train_iters}};
  if (summary.last_checkpoint) {
    line += "; saved checkpoint " + *summary.last_checkpoint + "; to go on: " + resume;
    fields["checkpoint"] = *summary.last_checkpoint;
    fields["resume_command"] = resume;
  } else {
    line += "; nothing was saved (no --save)";
    fields["checkpoint"] = nullptr;
  }
  log.print("stopped", fields, line);
}

/// Refuses a run whose estimated memory exceeds what the device has free; warns above 80%.
void check_memory(const config::RunConfig& config, const at::Device& device) {
  const auto available = runtime::available_memory_bytes(device);
  if (!available) return;
  const std::string where = device.is_cuda() ? runtime::device_name(device) : "this machine (host memory)";
  const runtime::Precision precision = runtime::choose_precision(config.model.bf16, device);  // the trainer's
  if (const auto warning = train::check_memory_fits(config, runtime::autocasts(precision), *available, where)) {
    log_warn(*warning);
  }
}

/// The stop request of --exit-signal-handler (on by default with --save): the first SIGINT or SIGTERM
/// lets the iteration finish and the run save; rank 0 says so at once.
std::optional<StopSignals> stop_signals_for(const config::RunConfig& config,
                                            const dist::LaunchEnvironment& environment) {
  if (!config.train.exit_signal_handler.value_or(config.train.save.has_value())) return std::nullopt;
  const std::string when = environment.is_distributed()
                               ? "at the next log line (every " + std::to_string(config.train.log_interval) +
                                     " iterations, where the ranks agree)"
                               : "after this iteration";
  const std::string then =
      config.train.save ? ", then saving to " + *config.train.save : ", without saving (no --save)";
  return std::optional<StopSignals>(std::in_place, environment.rank == 0,
                                    "stopping " + when + then + "; press Ctrl-C again to exit at once");
}

/// Builds the trainer, loads --load, trains and prints the summary (rank 0 prints; the others' log
/// drops everything).
int train_rank(const config::RunConfig& config, const at::Device& device, dist::ProcessGroups* groups,
               train::EventLog& log, const StopSignals* signals, const std::string& resume) {
  train::TokenDataset data =
      train::TokenDataset::open(config.train, config.model, default_corpus_path(), config.train.eval_iters);
  log.print("data", {{"description", data.description()}, {"format", data.format_description()}},
            "data: " + data.description() + " (format: " + data.format_description() + ")");
  train::Trainer trainer(config, std::move(data), device, groups);
  print_model_line(config, trainer, device, log);
  if (config.train.sample_tokens > 0 && !trainer.data().is_byte_level()) {
    log.note(
        "no samples: graphed reads text only through its byte-level tokenizer, and this data is token ids "
        "(pass text or a folder of .txt to --data-path to see samples)");
  }
  if (config.train.load) {
    trainer.load(*config.train.load);
    log.print("resumed", {{"folder", *config.train.load}, {"iteration", trainer.start_iteration()}},
              "resumed from " + *config.train.load + " at iteration " + std::to_string(trainer.start_iteration()));
    if (!trainer.state_not_in_checkpoint().empty()) {
      log.note("the checkpoint lacks this run's FP8 delayed-scaling state " +
               join(trainer.state_not_in_checkpoint(), ", ") +
               " (saved by a bf16 or tensorwise run, another --fp8-format or --fp8-amax-history-len, or under "
               "tensor or pipeline parallelism, whose checkpoints keep none): it starts afresh (scales 1, an "
               "empty history), so the first steps differ from an uninterrupted run");
    }
    if (trainer.start_iteration() >= config.train.train_iters) {
      log.note("nothing to train: the checkpoint is at iteration " + std::to_string(trainer.start_iteration()) +
               " and --train-iters is " + std::to_string(config.train.train_iters) +
               "; to go on, pass a larger --train-iters (e.g. --train-iters " +
               std::to_string(trainer.start_iteration() + config.train.train_iters) + ")");
      return 0;
    }
  }
  std::function<bool()> stop_requested;
  if (signals != nullptr) stop_requested = [signals] { return signals->requested(); };
  const train::TrainSummary summary = trainer.train(log, stop_requested);
  if (summary.stopped) print_stop(summary, config, signals->signal_name(), resume, log);
  if (config.train.eval_iters == 0 && !summary.stopped) {  // evaluations sample on their own, the last one included
    if (const auto text = trainer.sample(summary.last_iteration)) {
      log.print("sample", {{"iteration", summary.last_iteration}, {"text", *text}},
                "sample: " + quoted_one_line(*text));
    }
  }
  print_summary(summary, log);
  return 0;
}

}  // namespace

int run_train(const CommandLine& command_line, std::ostream& out) {
  const dist::LaunchEnvironment environment = launch_environment();
  std::ostream& print = environment.rank == 0 ? out : null_stream();
  const train::LogFormat format = command_line.json_output ? train::LogFormat::kJson : train::LogFormat::kText;
  // With --json, standard output holds only the JSON events; the setup's notes go to stderr.
  const config::RunConfig config =
      resolve_for_run(command_line, command_line.json_output ? std::cerr : print, environment.world_size);
  const at::Device device = device_for_rank(choose_device(config.train.device), environment);
  require_available_impl(config, device);
  check_memory(config, device);
  train::EventLog log(print, format);
  const std::optional<StopSignals> signals = stop_signals_for(config, environment);
  const StopSignals* stop = signals ? &*signals : nullptr;
  const std::string resume = config.train.save ? resume_command(command_line, environment) : "";
  if (config.train.load && !config.train.save) {
    const std::string& load = *config.train.load;  // a --save folder, or one of its iter_* folders
    const bool iteration_folder = path_exists(join_path(load, "trainer.json"));
    const std::string folder = iteration_folder ? parent_folder(load) : load;
    log.note("this run saves no checkpoint (no --save); to go on saving where it was loaded from, pass --save " +
             shell_word(folder));
  }
  if (!environment.is_distributed()) return train_rank(config, device, nullptr, log, stop, resume);
  DistributedRun distributed(config, environment, device);
  const int64_t experts = config.train.expert_model_parallel_size;
  const int64_t tensor = config.train.tensor_model_parallel_size;
  const int64_t expert_tensor = config.train.expert_tensor_parallel_size.value_or(tensor);
  // The expert layout, where it differs from the dense one: "; expert 2 x expert-data 2" (and the expert tensor size
  // when each expert is not split as the dense layers are).
  const std::string expert_layout =
      experts > 1 ? "; expert " + std::to_string(experts) + " x expert-data " +
                        std::to_string(tensor * *config.train.data_parallel_size / (experts * expert_tensor)) +
                        (expert_tensor != tensor ? " x expert-tensor " + std::to_string(expert_tensor) : "")
                  : std::string();
  log.print("launch",
            {{"ranks", environment.world_size},
             {"data_parallel_size", *config.train.data_parallel_size},
             {"pipeline_model_parallel_size", config.train.pipeline_model_parallel_size},
             {"tensor_model_parallel_size", config.train.tensor_model_parallel_size},
             {"expert_model_parallel_size", experts},
             {"expert_tensor_parallel_size", expert_tensor},
             {"backend", device.is_cuda() ? "NCCL" : "Gloo"},
             {"distributed_optimizer", config.train.use_distributed_optimizer}},
            "launch: " + std::to_string(environment.world_size) + " ranks (data-parallel " +
                std::to_string(*config.train.data_parallel_size) + " x pipeline " +
                std::to_string(config.train.pipeline_model_parallel_size) + " x tensor " + std::to_string(tensor) +
                expert_layout + "), " + (device.is_cuda() ? "NCCL" : "Gloo") +
                (config.train.use_distributed_optimizer ? "; optimizer sharded over the data-parallel ranks" : "") +
                "; rank 0 prints and writes");
  try {
    const int status = train_rank(config, device, &distributed.groups(), log, stop, resume);
    distributed.finish();
    return status;
  } catch (const DistributedError& error) {
    // A collective fails here when another rank went away: its own error is the cause worth printing.
    if (const auto cause = distributed.failure_of_another_rank()) {
      throw DistributedError("rank " + std::to_string(environment.rank) + " is stopping because " + *cause);
    }
    distributed.report_failure(error);
    throw;
  } catch (const std::exception& error) {
    distributed.report_failure(error);  // the other ranks stop instead of waiting for this one
    throw;
  }
}

}  // namespace graphed::cli
