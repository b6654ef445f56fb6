// cli/train_command.cpp — see cli/train_command.h.
#include "graphed/cli/train_command.h"

#include <iomanip>

#include "graphed/capture/device.h"
#include "graphed/cli/run_setup.h"
#include "graphed/train/trainer.h"

namespace graphed::cli {
namespace {

std::string printable(const std::string& text) {
  std::string out;
  for (const char c : text) out.push_back((c == '\n' || (c >= 32 && c < 127)) ? c : '?');
  return out;
}

}  // namespace

int run_train(const CommandLine& command_line, std::ostream& out) {
  const config::RunConfig config = resolve_for_run(command_line);
  const at::Device device = choose_device(config.train.device);
  require_available_impl(config, device);
  train::TokenDataset data =
      train::TokenDataset::open(config.train, config.model, default_corpus_path(), config.train.eval_iters);
  out << "data: " << data.description() << " (format: " << data.format_description() << ")\n";
  train::Trainer trainer(config, std::move(data), device);
  int64_t parameters = 0;
  for (const auto& parameter : trainer.model()->parameters()) parameters += parameter.numel();
  out << "model: " << config.model.num_layers << " layers, hidden " << config.model.hidden_size << ", "
      << parameters << " parameters" << (config.model.is_moe() ? " (MoE)" : "") << "; device: "
      << capture::device_name(device) << (config.model.bf16 && device.is_cuda() ? ", bf16 autocast" : ", fp32")
      << "; " << config.num_microbatches() << " microbatch(es) of " << config.train.micro_batch_size
      << " x " << config.model.seq_length << " tokens per iteration\n";
  if (config.train.load) {
    trainer.load(*config.train.load);
    out << "resumed from " << *config.train.load << " at iteration " << trainer.start_iteration() << "\n";
  }
  const train::TrainSummary summary = trainer.train(out);
  if (trainer.data().is_byte_level()) {
    const std::string prompt = "The ";
    const auto tokens = trainer.model()->generate(train::TokenDataset::encode_bytes(prompt), 64);
    out << "sample (greedy, 64 bytes after \"" << prompt << "\"):\n  " << printable(train::TokenDataset::decode_bytes(tokens))
        << "\n";
  }
  out << "done: " << summary.last_iteration << " iterations";
  if (!summary.intervals.empty()) {
    out << ", final loss " << std::fixed << std::setprecision(4) << summary.intervals.back().loss;
  }
  out << std::defaultfloat << "\n";
  return 0;
}

}  // namespace graphed::cli
