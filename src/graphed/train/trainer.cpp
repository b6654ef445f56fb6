// train/trainer.cpp — see train/trainer.h.
#include "graphed/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "graphed/capture/capture_state.h"
#include "graphed/capture/random_stream.h"
#include "graphed/dist/expert_collectives.h"
#include "graphed/dist/tensor_collectives.h"
#include "graphed/kernels/fp8_linear.h"
#include "graphed/kernels/training_ops.h"
#include "graphed/model/fp8_path.h"
#include "graphed/model/fused_path.h"
#include "graphed/model/moe.h"
#include "graphed/runtime/device.h"
#include "graphed/train/checkpoint.h"
#include "graphed/train/data_parallel_sync.h"
#include "graphed/train/expert_overflow.h"
#include "graphed/train/interval_timer.h"
#include "graphed/train/lr_schedule.h"
#include "graphed/train/output_paths.h"
#include "graphed/train/pipeline_checkpoint.h"
#include "graphed/train/progress.h"
#include "graphed/train/tensor_parallel_checkpoint.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"
#include "graphed/util/text.h"
#include "graphed/util/utf8.h"

namespace graphed::train {
namespace {

/// The max of each FP8 amax over the data- and tensor-parallel ranks of this pipeline stage, which hold the same
/// delayed-scaling slots (TransformerEngine reduces over the same group): every rank then scales alike, and a
/// checkpoint's state (rank 0's) is every rank's. Nothing to do for one process.
std::function<void(at::Tensor&)> amax_reduction(dist::ProcessGroups* groups) {
  if (groups == nullptr) return {};
  const bool data = groups->layout().data_size > 1;
  const bool tensor = groups->layout().tensor_size > 1;
  if (!data && !tensor) return {};
  return [groups, data, tensor](at::Tensor& amaxes) {
    if (data) groups->data().all_reduce_max(amaxes).wait();
    if (tensor) groups->tensor().all_reduce_max(amaxes).wait();
  };
}

/// FP8 (model/fp8_path.h) for the layers the config runs in FP8 (all, or all but the first and last); the
/// others and the output layer keep the fused bf16 path. Refused where no FP8 tensor core is.
/// Returns the state the FP8 path keeps across steps (model::Fp8Path::state), for checkpoints.
std::vector<std::pair<std::string, at::Tensor>> use_fp8_layers(model::GptModel& model,
                                                               const config::ModelConfig& config,
                                                               const std::shared_ptr<const model::FusedPath>& fused,
                                                               const at::Device& device, dist::ProcessGroups* groups) {
  model::Fp8Path::Options options;
  options.reduce_amaxes = amax_reduction(groups);
  options.recipe.gradient_format =
      *config.fp8_format == "hybrid" ? kernels::Fp8Format::kE5M2 : kernels::Fp8Format::kE4M3;
  options.recipe.fp8_weight_gradient = config.fp8_wgrad;
  if (config.fp8_recipe == "delayed") {
    options.delayed = kernels::DelayedScaling{
        config.fp8_amax_history_len, config.fp8_margin,
        config.fp8_amax_compute_algo == "max" ? kernels::AmaxAlgorithm::kMax : kernels::AmaxAlgorithm::kMostRecent};
  }
  // Every matrix of an FP8 layer's linears (not an MoE router's or a shared expert's gate: bf16).
  std::vector<at::Tensor> weights;
  for (auto& layer : model->layers()) {
    if (!config.fp8_layer(layer->layer_number())) continue;
    std::set<const void*> routing;
    for (const auto& module : layer->modules()) {
      if (const auto* moe = module->as<model::MoeImpl>()) {
        for (const at::Tensor& parameter : moe->routing_parameters()) routing.insert(parameter.unsafeGetTensorImpl());
      }
    }
    for (const auto& parameter : layer->named_parameters()) {
      // Another pipeline stage's layers have no working copy here (this rank never runs them).
      const bool routes = routing.count(parameter.value().unsafeGetTensorImpl()) > 0;
      if (parameter.value().dim() == 2 && !routes && fused->copy_of(parameter.value()).defined()) {
        weights.push_back(parameter.value());
      }
    }
  }
  const auto fp8 = std::make_shared<model::Fp8Path>(fused, weights, options, device);
  model->use_layer_kernel_paths([&](int64_t layer_number) -> std::shared_ptr<const model::KernelPath> {
    if (config.fp8_layer(layer_number)) return fp8;
    return fused;
  });
  return fp8->state();
}

std::string scientific(double value, int digits) {
  std::ostringstream out;
  out << std::scientific << std::setprecision(digits) << value;
  return out.str();
}

/// Megatron's model-parallel RNG (model_parallel_cuda_manual_seed): the dropout inside the tensor-parallel
/// regions draws from seed + 2718 + tensor rank, so the ranks' masks differ. Null when no such dropout runs.
std::shared_ptr<capture::RandomStream> model_parallel_random(const config::RunConfig& config,
                                                             const dist::ParallelLayout& layout,
                                                             const at::Device& device) {
  const bool sequence_dropout = config.train.sequence_parallel && config.model.hidden_dropout > 0.0;
  if (config.model.attention_dropout == 0.0 && !sequence_dropout) return nullptr;
  const auto seed = static_cast<uint64_t>(config.train.seed + 2718 + layout.tensor_rank());
  return std::make_shared<capture::RandomStream>(device, seed, "model_parallel");
}

}  // namespace

Trainer::Trainer(const config::RunConfig& config, TokenDataset data, const at::Device& device,
                 dist::ProcessGroups* groups)
    : config_(config),
      data_(std::move(data)),
      device_(device),
      layout_(groups != nullptr ? groups->layout() : dist::make_parallel_layout(config, 0)),
      groups_(groups) {
  GRAPHED_INTERNAL_ASSERT(!config.model.fp8() || kernels::fp8_supported(device_),
                          "FP8 training on a device without FP8 tensor cores (cli's require_available_impl checks)");
  at::manual_seed(static_cast<uint64_t>(config.train.seed));
  model_ = model::GptModel(config.model, config.moe_layers);
  if (layout_.tensor_size > 1) {  // each tensor rank keeps its part of the whole model it built
    model_->split_for_tensor_parallel(std::make_shared<dist::GroupTensorCollectives>(groups->tensor()),
                                      config.train.sequence_parallel, model_parallel_random(config, layout_, device_),
                                      layout_.splits_experts_over_tensor_ranks());
  }
  if (layout_.expert_size > 1) {  // each expert rank keeps its share of the experts
    model_->split_for_expert_parallel(std::make_shared<dist::GroupExpertCollectives>(groups->expert()));
  }
  model_->to(device_);
  // Every rank builds the whole model from the same seed (the weights of one process); it trains and
  // updates its own stages' parameters.
  const bool tied_output = !config.model.untie_embeddings_and_output_weights;
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  at::Tensor shared_embedding;
  for (const auto& item : model_->named_parameters()) {
    if (stage_trains_parameter(item.key(), layout_, tied_output)) parameters.emplace_back(item.key(), item.value());
    const bool shares = item.key() == "word_embeddings" && tied_output && layout_.is_pipelined();
    if (shares && stage_trains_parameter(item.key(), layout_, tied_output)) shared_embedding = item.value();
  }
  // Under expert parallelism the experts come last, so their gradients are one range of the flat buffer, which
  // the ranks holding the same experts reduce apart from the rest.
  const auto experts = model_->expert_splits();
  const auto is_dense = [&](const auto& item) { return layout_.expert_size == 1 || experts.count(item.first) == 0; };
  const auto first_expert = std::stable_partition(parameters.begin(), parameters.end(), is_dense);
  const auto expert_parameters = static_cast<int64_t>(parameters.end() - first_expert);
  // The fused path (model/fused_path.h) with bf16 autocast and --fused-kernels where the kernels run (a
  // CUDA build on a GPU): the optimizer keeps bf16 working copies of the weights for it.
  const runtime::Precision precision = runtime::choose_precision(config.model.bf16, device_);  // once, for the run
  const bool fused = runtime::autocasts(precision) && config.model.fused_kernels && !model_->parameters().empty() &&
                     kernels::training_kernels_supported(model_->parameters().front());
  make_optimizer(std::move(parameters), expert_parameters, shared_embedding, fused);
  GRAPHED_INTERNAL_ASSERT(fused || !config.model.fp8(), "FP8 without the fused path (config rule FP-1 checks)");
  if (fused) {
    auto fused_path =
        std::make_shared<model::FusedPath>(optimizer_->working_copies(), at::kBFloat16, /*accumulate_in_place=*/true);
    model_->use_kernel_path(fused_path);
    // --overlap-param-gather: the weights are gathered during the next forward, each linear waiting for its bucket
    // (the rules keep it to dense models without pipeline stages or FP8 under none or full_iteration).
    if (shards_ && config.train.overlap_param_gather) {
      gathers_deferred_ = true;
      fused_path->wait_for_copies_with(
          [shards = shards_.get()](const at::Tensor& master) { shards->wait_for(master); });
    }
    if (config.model.fp8()) carried_state_ = use_fp8_layers(model_, config.model, fused_path, device_, groups);
  }
  make_sync(shared_embedding, expert_parameters);
  step_ = std::make_unique<TrainingStep>(config_, model_, *optimizer_, *sync_, device_, precision, groups);
  runner_ = make_iteration_runner(*step_);
  peak_ = runtime::peak_throughput(device_, runtime::autocasts(step_->precision()));
  if (is_main_rank()) check_output_paths(config.train);
  if (config.train.metrics_file && is_main_rank()) {
    metrics_.emplace(*config.train.metrics_file, std::ios::app);
    if (!*metrics_) {
      throw DataError("cannot open --metrics-file '" + *config.train.metrics_file +
                      "' for writing; fix: pass a path in a writable folder");
    }
  }
}

Trainer::~Trainer() = default;

void Trainer::make_sync(const at::Tensor& shared_embedding, int64_t expert_parameters) {
  if (groups_ == nullptr) {
    sync_ = std::make_unique<GradientSync>();
    return;
  }
  const TensorParameters tensor = tensor_parameters();
  DataParallelOptions options;
  // Gradients averaged in buckets, overlapped with the backward, eager or inside a full-iteration graph,
  // wherever every parameter gets the same number of gradients in every backward (not so for MoE experts that
  // receive no token). The reducer hears autograd's accumulations and the fused kernels' in-place ones alike
  // (kernels/accumulation_listeners.h), and makes its hooks at the first arm(), on the backward's stream, which
  // a capture needs (Megatron-LM PR 6021). The per-layer graphs reduce after the backward.
  const config::CudaGraphImpl impl = config_.cuda_graph.impl;
  options.overlap = !config_.model.is_moe() &&
                    (impl == config::CudaGraphImpl::kNone || impl == config::CudaGraphImpl::kFullIteration);
  options.shared_embedding = shared_embedding;
  options.tensor_duplicates = tensor.duplicates;
  options.tensor_summed = tensor.summed;
  options.expert_parameters = expert_parameters;
  options.shards = shards_.get();
  options.defer_gathers = gathers_deferred_;
  options.reduce_in_bf16 = config_.train.grad_reduce_in_bf16;
  options.copies_reread = reruns_on_expert_overflow(config_, groups_);
  sync_ = std::make_unique<DataParallelSync>(*groups_, *optimizer_, std::move(options));
}

runtime::Precision Trainer::precision() const { return step_->precision(); }

std::vector<Batch> Trainer::host_batches(Split split, int64_t index) const {
  // Global batch `index` covers samples [index x G, (index + 1) x G); data-parallel rank d reads its
  // d-th consecutive share, so the ranks together see what one process would.
  const int64_t micro = config_.train.micro_batch_size;
  const int64_t microbatches = config_.num_microbatches();
  const int64_t first_sample = index * *config_.train.global_batch_size + layout_.data_rank() * microbatches * micro;
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
  // 2. This rank's microbatches of the iteration, on the host (pinned on CUDA).
  const std::vector<Batch> batches = host_batches(Split::kTrain, iteration);
  // 3. Forward, backward, clipping and the optimizer step, as the impl runs them (with --overlap-param-gather the
  //    step leaves the new weights' gathers to the next forward).
  weights_stale_ = gathers_deferred_;
  return runner_->train(batches);
}

void Trainer::delete_cuda_graphs() {
  runner_->delete_cuda_graphs();
  runtime::synchronize(device_);
  runtime::empty_cache(device_);  // the freed pools go back to the device
}

double Trainer::evaluate(int64_t round) {
  at::Tensor total = at::zeros({}, at::TensorOptions().device(device_).dtype(at::kFloat));
  for (int64_t i = 0; i < config_.train.eval_iters; ++i) {
    total += runner_->evaluate(host_batches(Split::kValidation, round * config_.train.eval_iters + i));
  }
  return config_.train.eval_iters > 0 ? total.item<double>() / static_cast<double>(config_.train.eval_iters) : 0.0;
}

double Trainer::tokens_per_iteration() const {
  return static_cast<double>(config_.train.global_batch_size.value_or(1) * config_.model.seq_length);
}

double Trainer::flops_per_iteration() const {
  const auto& m = config_.model;
  const double h = static_cast<double>(m.hidden_size);
  const double seq = static_cast<double>(m.seq_length);
  const double tokens = tokens_per_iteration();
  const double head_dim = static_cast<double>(m.head_dim());
  const double context = static_cast<double>(m.num_attention_heads) * head_dim;  // h unless --kv-channels
  const double groups = static_cast<double>(m.num_query_groups.value_or(m.num_attention_heads));
  const double attention = h * (context + 2.0 * groups * head_dim) + context * h;
  const double ffn_factor = m.swiglu ? 3.0 : 2.0;
  const double mamba_projections = static_cast<double>(model::mamba_shape(m).projection_weights());
  double parameters = h * static_cast<double>(m.vocab_size);  // output layer
  double attention_layers = 0;
  for (const model::LayerParts& parts : model::decoder_layer_parts(m, config_.moe_layers)) {
    if (parts.mixer == model::Mixer::kAttention) {
      parameters += attention;
      attention_layers += 1;
    }
    if (parts.mixer == model::Mixer::kMamba) parameters += mamba_projections;  // the scan itself is not counted
    if (parts.feed_forward == model::FeedForward::kMoe) {
      parameters += h * static_cast<double>(m.num_experts.value_or(0));
      parameters += static_cast<double>(m.moe_router_topk) * ffn_factor * h *
                    static_cast<double>(m.moe_ffn_hidden_size.value_or(0));
      parameters += ffn_factor * h * static_cast<double>(m.moe_shared_expert_intermediate_size.value_or(0));
    } else if (parts.feed_forward == model::FeedForward::kDense) {
      parameters += ffn_factor * h * static_cast<double>(m.ffn_hidden_size.value_or(0));
    }
  }
  const double attention_scores = 12.0 * attention_layers * seq * context;  // QK^T and AV, fwd + bwd
  return tokens * (6.0 * parameters + attention_scores);
}

void Trainer::write_metrics(const nlohmann::json& record) {
  if (metrics_) *metrics_ << record.dump() << '\n' << std::flush;
}

Trainer::TensorParameters Trainer::tensor_parameters() {
  TensorParameters tensor;
  if (layout_.tensor_size == 1) return tensor;
  const auto splits = model_->tensor_splits();
  // Under expert parallelism the experts are shares, reduced over their expert-data group: never duplicates, even
  // where they are whole over the tensor ranks (expert tensor size 1).
  const auto experts =
      layout_.expert_size > 1 ? model_->expert_splits() : std::map<std::string, model::ParameterSplit>();
  const bool tied_output = !config_.model.untie_embeddings_and_output_weights;
  for (const auto& item : model_->named_parameters()) {
    if (!stage_trains_parameter(item.key(), layout_, tied_output)) continue;  // another pipeline stage's
    if (experts.count(item.key()) != 0) continue;
    const auto split = splits.find(item.key());
    const bool summed = split != splits.end() && split->second.split == model::TensorSplit::kSummed;
    if (split != splits.end() && !summed) continue;  // sharded, or used by the first rank only
    tensor.duplicates.push_back(item.value());
    // Under sequence parallelism every whole parameter sees only this rank's part of the sequence.
    if (summed || config_.train.sequence_parallel) tensor.summed.push_back(item.value());
  }
  return tensor;
}

void Trainer::report_capture(Progress& progress, int64_t iteration) {
  const CaptureReport report = *runner_->capture_report();
  const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
  std::ostringstream line;
  line << "captured " << report.what << " at iteration " << iteration << " in " << std::fixed << std::setprecision(3)
       << report.seconds << " s (graph pool " << std::setprecision(1) << mib(report.memory.pool_bytes)
       << " MiB, graphs " << mib(report.memory.graph_bytes) << " MiB); replaying from here";
  progress.print("capture",
                 {{"what", report.what},
                  {"iteration", iteration},
                  {"seconds", report.seconds},
                  {"pool_bytes", report.memory.pool_bytes},
                  {"graph_bytes", report.memory.graph_bytes}},
                 line.str());
}

/// Losses and norms of the iterations since the last log line, summed on the device, and the time
/// their training took.
struct Trainer::Interval {
  at::Tensor loss_sum, norm_sum, non_finite;
  int64_t iterations = 0;
  IntervalTimer timer;
};

void Trainer::log_interval(Progress& progress, Interval& interval, int64_t done, TrainSummary& summary) {
  const auto& t = config_.train;
  const auto count = static_cast<double>(interval.iterations);
  IntervalRecord record;
  record.iteration = done;
  record.loss = interval.loss_sum.item<double>() / count;  // the interval's only sync
  record.grad_norm = interval.norm_sum.item<double>() / count;
  const double seconds = interval.timer.seconds();
  record.ms_per_iteration = 1000.0 * seconds / count;
  record.tokens_per_second = tokens_per_iteration() * count / seconds;
  record.tflops = flops_per_iteration() * count / seconds / 1e12;
  record.learning_rate = learning_rate(t, done - 1);
  nlohmann::json fields{{"iteration", done},
                        {"lr", record.learning_rate},
                        {"loss", record.loss},
                        {"grad_norm", record.grad_norm},
                        {"ms_per_iter", record.ms_per_iteration},
                        {"tokens_per_s", record.tokens_per_second},
                        {"tflops", record.tflops}};
  std::ostringstream line;
  line << "iteration " << std::setw(6) << done << "/" << t.train_iters << " | lr "
       << scientific(record.learning_rate, 3) << " | loss " << std::fixed << std::setprecision(4) << record.loss
       << " | grad norm " << std::setprecision(3) << record.grad_norm << " | " << std::setprecision(1)
       << record.ms_per_iteration << " ms/iter | " << group_thousands(record.tokens_per_second) << " tokens/s | "
       << std::defaultfloat << std::setprecision(3) << record.tflops << " TFLOP/s";
  if (const ExpertOverflowCheck* overflow = step_->expert_overflow()) {
    // Iterations run again dropless so far, because a rank's block (--moe-expert-rank-capacity-factor) overflowed.
    fields["moe_overflow_reruns"] = overflow->reruns();
    line << " | MoE reruns " << overflow->reruns();
    if (overflow->rows_needed() > 0) line << " (last needed " << overflow->rows_needed() << " rows a block)";
    if (overflow->stash_overflows() > 0) {
      // Iterations that found the paged stash (--moe-paged-stash) full: each ran again dropless, without it.
      fields["moe_paged_stash_overflows"] = overflow->stash_overflows();
      line << " (paged stash full in " << overflow->stash_overflows() << ")";
    }
  }
  if (device_.is_cuda()) {
    // This rank's peak since the last interval line: the steady state once the graphs exist, which the run's peak
    // (the done line) may hide behind an eager first iteration.
    const int64_t bytes = runtime::peak_memory_bytes(device_);
    peak_memory_bytes_ = std::max(peak_memory_bytes_, bytes);
    runtime::reset_peak_memory(device_);
    fields["peak_memory_mib"] = static_cast<double>(bytes) / (1 << 20);
    line << " | peak " << bytes / (1 << 20) << " MiB";
  }
  write_metrics(fields);
  if (peak_) {
    // Every rank's device counts: the run's FLOPs over the peak of all its devices.
    const double devices = static_cast<double>(layout_.world_size);
    const double mfu = 100.0 * record.tflops * 1e12 / (peak_->flops_per_second * devices);
    line << " | MFU " << std::fixed << std::setprecision(2) << mfu << "%";
    fields["mfu_percent"] = mfu;
  }
  fields["train_iters"] = t.train_iters;
  progress.print("interval", fields, line.str());
  summary.intervals.push_back(record);
  if (interval.non_finite.item<double>() > 0.0) {
    throw Error("loss or gradient norm became NaN or Inf between iterations " +
                std::to_string(done - interval.iterations + 1) + " and " + std::to_string(done) +
                "; fix: lower --lr, lengthen --lr-warmup-iters or keep --clip-grad on (pass "
                "--no-check-for-nan-in-loss-and-grad to train on regardless)");
  }
  interval.loss_sum.zero_();
  interval.norm_sum.zero_();
  interval.iterations = 0;
  interval.timer.restart();
}

void Trainer::evaluate_and_sample(Progress& progress, int64_t done, TrainSummary& summary) {
  // Fixed expert blocks (--moe-expert-rank-capacity-factor) would drop what overflows them: evaluation and samples
  // run dropless, eagerly (the dropless exchange reads counts on the host, which no graph holds), and leave no
  // overflow for the next iteration's check.
  std::optional<capture::EagerScope> eager;
  if (step_->checks_expert_overflow()) eager.emplace();
  complete_parameter_gathers();
  model_->use_dropless_experts(true);
  const double valid = evaluate(done / config_.train.eval_interval);
  std::ostringstream line;
  line << "validation loss at iteration " << done << ": " << std::fixed << std::setprecision(4) << valid;
  progress.print("validation", {{"iteration", done}, {"valid_loss", valid}}, line.str());
  write_metrics({{"iteration", done}, {"valid_loss", valid}});
  summary.validation_losses.emplace_back(done, valid);
  const auto text = sample(done);
  model_->use_dropless_experts(false);
  model_->take_moe_overflow();
  if (text) {
    progress.print("sample", {{"iteration", done}, {"text", *text}},
                   "sample at iteration " + std::to_string(done) + ": " + quoted_one_line(*text));
  }
}

std::optional<std::string> Trainer::sample(int64_t iteration) {
  const auto& t = config_.train;
  // Rank 0 draws it, with the other ranks of its tensor-parallel group and of its expert group (the model's
  // collectives need them all: with the same prompt and seed they draw the same tokens); under pipeline
  // parallelism no rank holds every layer's trained weights, and under sequence parallelism the model takes only
  // sequences that split over the ranks.
  const bool sequence_parallel = layout_.tensor_size > 1 && config_.train.sequence_parallel;
  const bool draws = layout_.expert_data_rank() == 0 && !layout_.is_pipelined() && !sequence_parallel;
  if (t.sample_tokens == 0 || !data_.is_byte_level() || !draws) return std::nullopt;
  capture::EagerScope eager;  // one row at a time through every graphed unit, eagerly
  compat::AutocastScope autocast(runtime::autocasts(step_->precision()));  // the precision training runs in
  model::Sampling sampling;
  sampling.temperature = t.sample_temperature;
  sampling.top_k = t.sample_top_k;
  sampling.seed = static_cast<uint64_t>(t.seed) + static_cast<uint64_t>(iteration);
  sampling.vocabulary = TokenDataset::kByteVocabulary;  // --vocab-size may pad the table past the bytes
  const auto tokens = model_->generate(TokenDataset::encode_bytes(t.sample_prompt), t.sample_tokens, sampling);
  if (!is_main_rank()) return std::nullopt;
  return to_valid_utf8_lossy(TokenDataset::decode_bytes(tokens));
}

bool Trainer::agree_to_stop(bool requested_here, bool at_log_line) {
  if (groups_ == nullptr) return requested_here;
  // Several ranks stop together or not at all: each says whether it was asked, at the log line (where
  // the host waits for the device anyway), and all stop if any was.
  if (!at_log_line) return false;
  at::Tensor votes = at::full({1}, requested_here ? 1.0f : 0.0f, at::TensorOptions().device(device_).dtype(at::kFloat));
  groups_->world().all_reduce_sum(votes).wait();
  return votes.item<float>() > 0.0f;
}

bool Trainer::save_due(int64_t done) const {
  const auto& t = config_.train;
  return t.save && ((t.save_interval && done % *t.save_interval == 0) || done == t.train_iters);
}

void Trainer::save_and_report(Progress& progress, int64_t done, TrainSummary& summary) {
  const std::string folder = save(done);
  summary.last_checkpoint = folder;
  progress.print("checkpoint", {{"iteration", done}, {"folder", folder}}, "saved checkpoint " + folder);
}

TrainSummary Trainer::train(std::ostream& out) {
  EventLog log(out, LogFormat::kText);
  return train(log);
}

TrainSummary Trainer::train(EventLog& log, const std::function<bool()>& stop_requested) {
  const auto& t = config_.train;
  TrainSummary summary;
  summary.first_iteration = summary.last_iteration = start_iteration_;
  // Heartbeat lines go to the log unless it prints to the terminal; tests and files get them.
  Progress progress(start_iteration_, t.train_iters, tokens_per_iteration(), log,
                    is_main_rank() && ::isatty(::fileno(stderr)) != 0, log.prints_to_terminal());
  const at::TensorOptions scalar = at::TensorOptions().device(device_).dtype(at::kFloat);
  Interval interval{at::zeros({}, scalar), at::zeros({}, scalar), at::zeros({}, scalar)};
  bool capture_reported = runner_->capture_report().has_value();
  for (int64_t iteration = start_iteration_; iteration < t.train_iters; ++iteration) {
    const IterationStats stats = train_step(iteration);
    if (!capture_reported && runner_->capture_report()) {  // once the graphs exist, nothing is asked again
      capture_reported = true;
      report_capture(progress, iteration + 1);
    }
    interval.loss_sum += stats.loss;
    interval.norm_sum += stats.grad_norm;
    if (config_.cuda_graph.check_for_nan_in_loss_and_grad) {
      interval.non_finite += (~at::isfinite(stats.loss + stats.grad_norm)).to(at::kFloat);  // device-side, deferred
    }
    ++interval.iterations;
    const int64_t done = iteration + 1;
    summary.last_iteration = done;
    progress.update(done);
    const bool log_line = done % t.log_interval == 0 || done == t.train_iters;
    if (log_line) log_interval(progress, interval, done, summary);
    const bool stop = stop_requested && agree_to_stop(stop_requested(), log_line);
    if (stop && interval.iterations > 0) log_interval(progress, interval, done, summary);  // the loss so far
    const IntervalTimer::Pause pause(interval.timer);  // checkpoints and evaluations are not training time
    // Saved first (nothing the evaluation or sample does can lose it), and before anything is printed,
    // so that an error stands on a line of its own.
    if (save_due(done) || (stop && t.save)) save_and_report(progress, done, summary);
    if (stop) {
      summary.stopped = true;
      break;
    }
    if (t.eval_iters > 0 && (done % t.eval_interval == 0 || done == t.train_iters)) {
      evaluate_and_sample(progress, done, summary);
    }
  }
  complete_parameter_gathers();  // the weights whole for what follows (samples, the caller)
  summary.seconds = progress.elapsed_seconds();
  summary.tokens = static_cast<double>(summary.last_iteration - start_iteration_) * tokens_per_iteration();
  summary.peak_memory_bytes = std::max(peak_memory_bytes_, runtime::peak_memory_bytes(device_));
  if (const kernels::PagedStash* stash = model_->paged_stash()) summary.paged_stash_bytes = stash->pool_bytes();
  summary.adam_moment_bytes = optimizer_->moment_bytes();
  summary.master_bytes = optimizer_->master_bytes();
  return summary;
}

}  // namespace graphed::train
