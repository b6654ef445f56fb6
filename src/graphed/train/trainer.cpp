// train/trainer.cpp — see train/trainer.h.
#include "graphed/train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "graphed/capture/device.h"
#include "graphed/train/checkpoint.h"
#include "graphed/train/lr_schedule.h"
#include "graphed/train/progress_bar.h"
#include "graphed/util/error.h"
#include "graphed/util/text.h"

namespace graphed::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string scientific(double value, int digits) {
  std::ostringstream out;
  out << std::scientific << std::setprecision(digits) << value;
  return out.str();
}

std::string grouped(double value) {
  std::string digits = std::to_string(static_cast<int64_t>(std::llround(value)));
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<std::size_t>(i), ",");
  return digits;
}

}  // namespace

Trainer::Trainer(const config::RunConfig& config, TokenDataset data, const at::Device& device)
    : config_(config), data_(std::move(data)), device_(device) {
  at::manual_seed(static_cast<uint64_t>(config.train.seed));
  model_ = model::GptModel(config.model, config.moe_layers);
  model_->to(device_);
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  for (const auto& item : model_->named_parameters()) parameters.emplace_back(item.key(), item.value());
  AdamWOptions options;
  options.beta1 = config.train.adam_beta1;
  options.beta2 = config.train.adam_beta2;
  options.eps = config.train.adam_eps;
  options.weight_decay = config.train.weight_decay;
  optimizer_ = std::make_unique<AdamW>(std::move(parameters), options);
  step_ = std::make_unique<TrainingStep>(config_, model_, *optimizer_, device_);
  runner_ = make_iteration_runner(*step_);
  if (config.train.metrics_file) {
    metrics_.emplace(*config.train.metrics_file, std::ios::app);
    if (!*metrics_) {
      throw DataError("cannot open --metrics-file '" + *config.train.metrics_file +
                      "' for writing; fix: pass a path in a writable folder");
    }
  }
}

Trainer::~Trainer() = default;

std::vector<Batch> Trainer::host_batches(Split split, int64_t first_sample, int64_t microbatches) const {
  const int64_t micro = config_.train.micro_batch_size;
  std::vector<Batch> batches;
  for (int64_t m = 0; m < microbatches; ++m) {
    Batch batch = data_.batch(split, first_sample + m * micro, micro);
    if (device_.is_cuda()) batch = {batch.tokens.pin_memory(), batch.labels.pin_memory()};
    batches.push_back(std::move(batch));
  }
  return batches;
}

IterationStats Trainer::train_step(int64_t iteration) {
  // 1. The learning rate of this iteration, computed on the host and written to the device.
  optimizer_->set_learning_rate(learning_rate(config_.train, iteration));
  // 2. This iteration's microbatches, on the host (pinned on CUDA).
  const int64_t microbatches = config_.num_microbatches();
  const std::vector<Batch> batches =
      host_batches(Split::kTrain, iteration * microbatches * config_.train.micro_batch_size, microbatches);
  // 3. Forward, backward, clipping and the optimizer step, as the impl runs them.
  return runner_->train(batches);
}

void Trainer::delete_cuda_graphs() {
  runner_->delete_cuda_graphs();
  capture::synchronize(device_);
  capture::empty_cache(device_);  // the freed pools go back to the device
}

double Trainer::evaluate(int64_t round) {
  const int64_t microbatches = config_.num_microbatches();
  at::Tensor total = at::zeros({}, at::TensorOptions().device(device_).dtype(at::kFloat));
  for (int64_t i = 0; i < config_.train.eval_iters; ++i) {
    const int64_t first = (round * config_.train.eval_iters + i) * microbatches * config_.train.micro_batch_size;
    total += runner_->evaluate(host_batches(Split::kValidation, first, microbatches));
  }
  return config_.train.eval_iters > 0 ? total.item<double>() / static_cast<double>(config_.train.eval_iters) : 0.0;
}

double Trainer::flops_per_iteration() const {
  const auto& m = config_.model;
  const double h = static_cast<double>(m.hidden_size);
  const double seq = static_cast<double>(m.seq_length);
  const double tokens = static_cast<double>(config_.train.global_batch_size.value_or(1)) * seq;
  const double head_dim = h / static_cast<double>(m.num_attention_heads);
  const double groups = static_cast<double>(m.num_query_groups.value_or(m.num_attention_heads));
  const double attention = h * (h + 2.0 * groups * head_dim) + h * h;
  const double ffn_factor = m.swiglu ? 3.0 : 2.0;
  double parameters = h * static_cast<double>(m.vocab_size);  // output layer
  for (const bool moe : config_.moe_layers) {
    parameters += attention;
    if (moe) {
      parameters += h * static_cast<double>(m.num_experts.value_or(0));
      parameters += static_cast<double>(m.moe_router_topk) * ffn_factor * h * static_cast<double>(m.moe_ffn_hidden_size.value_or(0));
      parameters += ffn_factor * h * static_cast<double>(m.moe_shared_expert_intermediate_size.value_or(0));
    } else {
      parameters += ffn_factor * h * static_cast<double>(m.ffn_hidden_size.value_or(0));
    }
  }
  const double attention_scores = 12.0 * static_cast<double>(m.num_layers) * seq * h;  // QK^T and AV, fwd + bwd
  return tokens * (6.0 * parameters + attention_scores);
}

void Trainer::write_metrics(const nlohmann::json& record) {
  if (metrics_) *metrics_ << record.dump() << '\n' << std::flush;
}

void Trainer::load(const std::string& dir) {
  start_iteration_ = load_checkpoint(dir, model_, *optimizer_, config_, device_);
}

std::string Trainer::save(int64_t iterations) {
  return save_checkpoint(*config_.train.save, iterations, model_, *optimizer_, config_, device_);
}

void Trainer::report_capture(std::ostream& out, int64_t iteration) {
  const CaptureReport report = *runner_->capture_report();
  const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
  out << "captured " << report.what << " at iteration " << iteration << " in " << std::fixed << std::setprecision(3)
      << report.seconds << " s (graph pool " << std::setprecision(1) << mib(report.memory.pool_bytes) << " MiB, graphs "
      << mib(report.memory.graph_bytes) << " MiB); replaying from here" << std::defaultfloat << std::endl;
}

TrainSummary Trainer::train(std::ostream& out) {
  const auto& t = config_.train;
  TrainSummary summary;
  ProgressBar bar(t.train_iters, ::isatty(::fileno(stderr)) != 0);
  const double tokens_per_iteration = static_cast<double>(t.global_batch_size.value_or(1) * config_.model.seq_length);
  const at::TensorOptions scalar = at::TensorOptions().device(device_).dtype(at::kFloat);
  at::Tensor loss_sum = at::zeros({}, scalar), norm_sum = at::zeros({}, scalar), non_finite = at::zeros({}, scalar);
  int64_t in_interval = 0;
  auto interval_start = Clock::now();
  bool capture_reported = runner_->capture_report().has_value();
  for (int64_t iteration = start_iteration_; iteration < t.train_iters; ++iteration) {
    const IterationStats stats = train_step(iteration);
    if (!capture_reported && runner_->capture_report()) {  // once the graphs exist, nothing is asked again
      capture_reported = true;
      bar.clear();
      report_capture(out, iteration + 1);
    }
    loss_sum += stats.loss;
    norm_sum += stats.grad_norm;
    if (config_.cuda_graph.check_for_nan_in_loss_and_grad) {
      non_finite += (~at::isfinite(stats.loss + stats.grad_norm)).to(at::kFloat);  // device-side, deferred
    }
    ++in_interval;
    const int64_t done = iteration + 1;
    bar.update(done);
    if (done % t.log_interval == 0 || done == t.train_iters) {
      IntervalRecord record;
      record.iteration = done;
      record.loss = loss_sum.item<double>() / static_cast<double>(in_interval);  // the interval's only sync
      record.grad_norm = norm_sum.item<double>() / static_cast<double>(in_interval);
      const double seconds = std::chrono::duration<double>(Clock::now() - interval_start).count();
      record.ms_per_iteration = 1000.0 * seconds / static_cast<double>(in_interval);
      record.tokens_per_second = tokens_per_iteration * static_cast<double>(in_interval) / seconds;
      record.tflops = flops_per_iteration() * static_cast<double>(in_interval) / seconds / 1e12;
      record.learning_rate = learning_rate(t, iteration);
      bar.clear();
      out << "iteration " << std::setw(6) << done << "/" << t.train_iters << " | lr " << scientific(record.learning_rate, 3)
          << " | loss " << std::fixed << std::setprecision(4) << record.loss << " | grad norm " << std::setprecision(3)
          << record.grad_norm << " | " << std::setprecision(1) << record.ms_per_iteration << " ms/iter | "
          << grouped(record.tokens_per_second) << " tokens/s | " << std::defaultfloat << std::setprecision(3)
          << record.tflops << " TFLOP/s" << std::endl;
      write_metrics({{"iteration", done}, {"lr", record.learning_rate}, {"loss", record.loss},
                     {"grad_norm", record.grad_norm}, {"ms_per_iter", record.ms_per_iteration},
                     {"tokens_per_s", record.tokens_per_second}, {"tflops", record.tflops}});
      summary.intervals.push_back(record);
      if (non_finite.item<double>() > 0.0) {
        throw Error("loss or gradient norm became NaN or Inf between iterations " + std::to_string(done - in_interval + 1) +
                    " and " + std::to_string(done) + "; fix: lower --lr, lengthen --lr-warmup-iters or keep "
                    "--clip-grad on (pass --no-check-for-nan-in-loss-and-grad to train on regardless)");
      }
      loss_sum.zero_();
      norm_sum.zero_();
      in_interval = 0;
      interval_start = Clock::now();
    }
    if (t.eval_iters > 0 && (done % t.eval_interval == 0 || done == t.train_iters)) {
      const double valid = evaluate(done / t.eval_interval);
      out << "validation loss at iteration " << done << ": " << std::fixed << std::setprecision(4) << valid
          << std::defaultfloat << std::endl;
      write_metrics({{"iteration", done}, {"valid_loss", valid}});
      summary.validation_losses.emplace_back(done, valid);
      interval_start = Clock::now();
    }
    if (t.save && ((t.save_interval && done % *t.save_interval == 0) || done == t.train_iters)) {
      out << "saved checkpoint " << save(done) << std::endl;
      interval_start = Clock::now();
    }
    summary.last_iteration = done;
  }
  bar.clear();
  return summary;
}

}  // namespace graphed::train
