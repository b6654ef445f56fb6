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
#include "graphed/util/compat.h"
#include "graphed/util/error.h"
#include "graphed/util/logging.h"
#include "graphed/util/text.h"

namespace graphed::train {
namespace {

using Clock = std::chrono::steady_clock;

/// Host tensor -> device without blocking the host: through pinned memory on CUDA (a pageable copy
/// would wait for the stream, serializing the host with the GPU every iteration).
at::Tensor to_device(const at::Tensor& host, const at::Device& device) {
  if (!device.is_cuda()) return host;
  return host.to(device, /*non_blocking=*/true);
}

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
  if (config.cuda_graph.impl == config::CudaGraphImpl::kFullIteration) {
    GRAPHED_CHECK(device_.is_cuda(), ConfigError,
                  "--cuda-graph-impl full_iteration needs a CUDA device, but the trainer was given ", device_.str(),
                  "; fix: --cuda-graph-impl none, or train on a GPU");
    // Everything (eager warmup, capture, replays) runs on one stream: autograd's accumulate-grad nodes
    // of the warmup then belong to the capturing stream. One pool for both graphs unless told otherwise.
    stream_ = std::make_unique<capture::SideStream>(device_);
    const capture::GraphPool pool = config.cuda_graph.use_single_mempool ? capture::GraphPool::create() : capture::GraphPool();
    capture::FullIterationGraphOptions options;
    options.warmup_steps = config.cuda_graph.warmup_steps;
    options.name = "the full-iteration training step";
    train_graph_ = std::make_unique<capture::FullIterationGraph>(options, device_, pool);
    options.name = "the full-iteration evaluation step";
    eval_graph_ = std::make_unique<capture::FullIterationGraph>(options, device_, pool);
  }
  if (config.cuda_graph.impl == config::CudaGraphImpl::kTransformerEngine) {
    GRAPHED_CHECK(device_.is_cuda(), ConfigError,
                  "--cuda-graph-impl transformer_engine needs a CUDA device, but the trainer was given ", device_.str(),
                  "; fix: --cuda-graph-impl none, or train on a GPU");
    stream_ = std::make_unique<capture::SideStream>(device_);  // eager steps, capture and replays on one stream
    LayerGraphOptions options;
    options.runtime_microbatches = config.num_microbatches();
    options.warmup_steps = config.cuda_graph.warmup_steps;
    options.autocast = config.model.bf16;
    options.retain_backward_graph = config.cuda_graph.retain_backward_graph;
    layer_graphs_ = std::make_unique<LayerGraphHelper>(model_, config.cuda_graph, options);
    if (layer_graphs_->unit_count() == 0) {
      log_warn("--cuda-graph-impl transformer_engine: no layer has a unit that --cuda-graph-modules " +
               config::to_string(config.cuda_graph.modules) + " selects; training eagerly");
    }
  }
  if (config.train.metrics_file) {
    metrics_.emplace(*config.train.metrics_file, std::ios::app);
    if (!*metrics_) {
      throw DataError("cannot open --metrics-file '" + *config.train.metrics_file +
                      "' for writing; fix: pass a path in a writable folder");
    }
  }
}

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

std::vector<Batch> Trainer::static_batches(const capture::StaticBatchBuffer& buffer) const {
  std::vector<Batch> batches;
  for (int64_t m = 0; m < buffer.microbatches(); ++m) batches.push_back({buffer.microbatch(m)[0], buffer.microbatch(m)[1]});
  return batches;
}

std::pair<at::Tensor, at::Tensor> Trainer::forward_backward(const std::vector<Batch>& microbatches) {
  const double scale = 1.0 / static_cast<double>(microbatches.size());
  at::Tensor loss_sum, aux_sum;
  for (std::size_t index = 0; index < microbatches.size(); ++index) {
    const Batch& batch = microbatches[index];
    if (layer_graphs_) layer_graphs_->set_microbatch(static_cast<int64_t>(index));
    model::GptOutput output;
    {
      compat::AutocastScope autocast(config_.model.bf16 && device_.is_cuda());
      output = model_->forward(batch.tokens, batch.labels);
    }
    (microbatches.size() > 1 ? output.loss * scale : output.loss).backward();
    const at::Tensor lm = output.lm_loss.detach().to(at::kFloat);
    const at::Tensor aux = output.aux_loss.detach().to(at::kFloat);
    loss_sum = loss_sum.defined() ? loss_sum.add_(lm) : lm.clone();
    aux_sum = aux_sum.defined() ? aux_sum.add_(aux) : aux.clone();
  }
  if (microbatches.size() > 1) {
    loss_sum.mul_(scale);
    aux_sum.mul_(scale);
  }
  return {loss_sum, aux_sum};
}

void Trainer::optimizer_step(const at::Tensor& grad_norm) {
  // Sync-free clipping: AdamW divides every gradient by grad_scale = max(1, norm / --clip-grad).
  std::optional<at::Tensor> grad_scale;
  if (config_.train.clip_grad > 0.0) grad_scale = at::clamp_min((grad_norm + 1e-6) / config_.train.clip_grad, 1.0);
  optimizer_->step(grad_scale);
}

IterationStats Trainer::run_iteration(const std::vector<Batch>& batches, bool with_optimizer) {
  optimizer_->zero_grad();
  model_->train();
  auto [loss, aux_loss] = forward_backward(batches);
  const at::Tensor grad_norm = optimizer_->gradient_norm();
  if (with_optimizer) optimizer_step(grad_norm);
  return {loss, aux_loss, grad_norm};
}

IterationStats Trainer::train_step(int64_t iteration) {
  std::optional<capture::SideStream::Use> on_stream;
  if (stream_) on_stream.emplace(*stream_);
  // 1. The learning rate of this iteration, computed on the host and written to the device.
  optimizer_->set_learning_rate(learning_rate(config_.train, iteration));
  // 2. This iteration's microbatches, on the host (pinned on CUDA).
  const int64_t microbatches = config_.num_microbatches();
  const std::vector<Batch> batches =
      host_batches(Split::kTrain, iteration * microbatches * config_.train.micro_batch_size, microbatches);
  if (!train_graph_) {
    // 3. Eager or per-layer graphs: copy to the device, forward/backward, clip, optimizer step. Per-layer
    //    graphs are captured at the top of the first step after the warmup steps (as MCore does).
    std::vector<Batch> on_device;
    for (const Batch& b : batches) on_device.push_back({to_device(b.tokens, device_), to_device(b.labels, device_)});
    if (layer_graphs_ && !layer_graphs_->is_captured() && iteration - start_iteration_ >= config_.cuda_graph.warmup_steps) {
      capture_layer_graphs(on_device.front());
    }
    return run_iteration(on_device, /*with_optimizer=*/true);
  }
  // 3. Full iteration: fill the static buffers, then warm up, capture or replay the graph.
  for (int64_t m = 0; m < microbatches; ++m) {
    train_buffer_.fill_microbatch(m, {batches[static_cast<std::size_t>(m)].tokens, batches[static_cast<std::size_t>(m)].labels},
                                  device_);
  }
  const bool optimizer_inside = config_.cuda_graph.optimizer_cuda_graph;
  const auto outputs = train_graph_->run([&] {
    const IterationStats stats = run_iteration(static_batches(train_buffer_), optimizer_inside);
    return std::vector<at::Tensor>{stats.loss, stats.aux_loss, stats.grad_norm};
  });
  // 4. Without --optimizer-cuda-graph the optimizer step runs eagerly after the replay.
  if (!optimizer_inside) optimizer_step(outputs[2]);
  return {outputs[0], outputs[1], outputs[2]};
}

at::Tensor Trainer::evaluation_loss(const std::vector<Batch>& batches) {
  at::NoGradGuard no_grad;
  model_->eval();
  at::Tensor total;
  for (const Batch& batch : batches) {
    compat::AutocastScope autocast(config_.model.bf16 && device_.is_cuda());
    const at::Tensor loss = model_->forward(batch.tokens, batch.labels).lm_loss.to(at::kFloat);
    total = total.defined() ? total + loss : loss;
  }
  model_->train();
  return total / static_cast<double>(batches.size());
}

void Trainer::capture_layer_graphs(const Batch& first_microbatch) {
  model_->train();
  layer_graphs_->capture(
      [&] {
        compat::AutocastScope autocast(config_.model.bf16 && device_.is_cuda());
        model_->forward(first_microbatch.tokens, first_microbatch.labels);
      },
      device_);
}

void Trainer::delete_cuda_graphs() {
  if (layer_graphs_) layer_graphs_->reset();
  if (train_graph_) train_graph_->reset();
  if (eval_graph_) eval_graph_->reset();
  capture::synchronize(device_);
  capture::empty_cache(device_);
}

double Trainer::evaluate(int64_t round) {
  std::optional<capture::SideStream::Use> on_stream;
  if (stream_) on_stream.emplace(*stream_);
  const int64_t microbatches = config_.num_microbatches();
  at::Tensor total = at::zeros({}, at::TensorOptions().device(device_).dtype(at::kFloat));
  for (int64_t i = 0; i < config_.train.eval_iters; ++i) {
    const int64_t first = (round * config_.train.eval_iters + i) * microbatches * config_.train.micro_batch_size;
    const std::vector<Batch> batches = host_batches(Split::kValidation, first, microbatches);
    if (!eval_graph_) {
      std::vector<Batch> on_device;
      for (const Batch& b : batches) on_device.push_back({to_device(b.tokens, device_), to_device(b.labels, device_)});
      total += evaluation_loss(on_device);
      continue;
    }
    for (int64_t m = 0; m < microbatches; ++m) {
      eval_buffer_.fill_microbatch(m, {batches[static_cast<std::size_t>(m)].tokens, batches[static_cast<std::size_t>(m)].labels},
                                   device_);
    }
    total += eval_graph_->run([&] { return std::vector<at::Tensor>{evaluation_loss(static_batches(eval_buffer_))}; })[0];
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

TrainSummary Trainer::train(std::ostream& out) {
  const auto& t = config_.train;
  TrainSummary summary;
  ProgressBar bar(t.train_iters, ::isatty(::fileno(stderr)) != 0);
  const double tokens_per_iteration = static_cast<double>(t.global_batch_size.value_or(1) * config_.model.seq_length);
  const at::TensorOptions scalar = at::TensorOptions().device(device_).dtype(at::kFloat);
  at::Tensor loss_sum = at::zeros({}, scalar), norm_sum = at::zeros({}, scalar), non_finite = at::zeros({}, scalar);
  int64_t in_interval = 0;
  auto interval_start = Clock::now();
  for (int64_t iteration = start_iteration_; iteration < t.train_iters; ++iteration) {
    const bool was_captured = train_graph_ && train_graph_->is_captured();
    const bool layers_were_captured = layer_graphs_ && layer_graphs_->is_captured();
    const IterationStats stats = train_step(iteration);
    if (layer_graphs_ && !layers_were_captured && layer_graphs_->is_captured()) {
      bar.clear();
      out << "captured " << layer_graphs_->unit_count() << " layer units (" << layer_graphs_->graph_count()
          << " graphs, --cuda-graph-impl transformer_engine) at iteration " << iteration + 1 << " in " << std::fixed
          << std::setprecision(3) << layer_graphs_->capture_seconds() << " s (graph pool " << std::setprecision(1)
          << static_cast<double>(layer_graphs_->pool_bytes()) / (1024.0 * 1024.0) << " MiB); replaying from here"
          << std::defaultfloat << std::endl;
    }
    if (train_graph_ && !was_captured && train_graph_->is_captured()) {
      bar.clear();
      out << "captured the full-iteration training step at iteration " << iteration + 1 << " in " << std::fixed
          << std::setprecision(3) << train_graph_->capture_seconds() << " s (graph pool "
          << std::setprecision(1) << static_cast<double>(train_graph_->pool_bytes()) / (1024.0 * 1024.0) << " MiB"
          << (config_.cuda_graph.optimizer_cuda_graph ? ", optimizer step inside" : ", optimizer step eager")
          << "); replaying from here" << std::defaultfloat << std::endl;
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
