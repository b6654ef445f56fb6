// train/memory_estimate.cpp — see train/memory_estimate.h.
#include "graphed/train/memory_estimate.h"

#include <algorithm>
#include <cstdio>

#include "graphed/model/gpt_model.h"
#include "graphed/util/error.h"

namespace graphed::train {
namespace {

/// "195.3 GiB", "2.0 MiB".
std::string gib(int64_t bytes) {
  const double mebibytes = static_cast<double>(bytes) / (1024.0 * 1024.0);
  char text[32];
  if (mebibytes < 1024.0) {
    std::snprintf(text, sizeof(text), "%.1f MiB", mebibytes);
  } else {
    std::snprintf(text, sizeof(text), "%.1f GiB", mebibytes / 1024.0);
  }
  return text;
}

/// Parameters one rank holds times the tensor size (the caller divides by it), counted from the configuration
/// (weights only; biases and norms are small): every expert, or under expert parallelism its share of them, whole on
/// each tensor rank with an expert tensor size of 1.
double parameter_count(const config::RunConfig& config) {
  const auto& m = config.model;
  const auto& t = config.train;
  const double h = static_cast<double>(m.hidden_size);
  const double ffn = static_cast<double>(m.ffn_hidden_size.value_or(4 * m.hidden_size));
  const int64_t tensor = std::max<int64_t>(1, t.tensor_model_parallel_size);
  const double whole_experts = t.expert_tensor_parallel_size.value_or(tensor) == 1 ? static_cast<double>(tensor) : 1.0;
  const double experts = static_cast<double>(m.num_experts.value_or(1)) /
                         static_cast<double>(std::max<int64_t>(1, t.expert_model_parallel_size)) * whole_experts;
  const double expert_ffn = static_cast<double>(m.moe_ffn_hidden_size.value_or(m.ffn_hidden_size.value_or(0)));
  const double mlp_factor = m.swiglu ? 3.0 : 2.0;
  const double context = static_cast<double>(m.num_attention_heads * m.head_dim());  // h unless --kv-channels
  double count = static_cast<double>(m.vocab_size) * h * (m.untie_embeddings_and_output_weights ? 2.0 : 1.0);
  const double mamba_weights = static_cast<double>(model::mamba_shape(m).projection_weights());
  for (const model::LayerParts& parts : model::decoder_layer_parts(m, config.moe_layers)) {
    if (parts.mixer == model::Mixer::kAttention) count += 4.0 * h * context;
    if (parts.mixer == model::Mixer::kMamba) count += mamba_weights;
    if (parts.feed_forward == model::FeedForward::kDense) count += mlp_factor * h * ffn;
    if (parts.feed_forward == model::FeedForward::kMoe) count += mlp_factor * h * experts * expert_ffn;
  }
  return count;
}

}  // namespace

MemoryEstimate estimate_training_memory(const config::RunConfig& config, bool autocast) {
  const auto& m = config.model;
  const double s = static_cast<double>(m.seq_length);
  const double h = static_cast<double>(m.hidden_size);
  const double ffn = static_cast<double>(m.ffn_hidden_size.value_or(4 * m.hidden_size));
  const double topk = m.is_moe() ? static_cast<double>(m.moe_router_topk) : 1.0;
  const double per_layer = s * (10.0 * h + 2.0 * ffn * topk) + 2.0 * static_cast<double>(m.num_attention_heads) * s * s;
  const double logits = 3.0 * s * static_cast<double>(m.vocab_size);
  // Each tensor-parallel rank holds about 1/T of the weights, the split activations and the logits
  // (the norms and the hidden-size activations it holds whole are left out of this estimate).
  const double tensor = static_cast<double>(std::max<int64_t>(1, config.train.tensor_model_parallel_size));
  MemoryEstimate estimate;
  // fp32 parameters, gradients and both moments; the distributed optimizer keeps a 1/D share of all but the
  // gradients (of the parameters kept whole more: this leaves them out).
  const bool sharded = config.train.use_distributed_optimizer;
  const double data =
      sharded ? static_cast<double>(std::max<int64_t>(1, config.train.data_parallel_size.value_or(1))) : 1.0;
  estimate.state_bytes = static_cast<int64_t>((4.0 + 12.0 / data) * parameter_count(config) / tensor);
  const double element_bytes = autocast ? 2.0 : 4.0;
  estimate.activation_bytes_per_sample =
      static_cast<int64_t>((element_bytes * static_cast<double>(m.num_layers) * per_layer + 4.0 * logits) / tensor);
  estimate.micro_batch_size = config.train.micro_batch_size;
  return estimate;
}

std::optional<std::string> check_memory_fits(const config::RunConfig& config, bool autocast, int64_t available_bytes,
                                             const std::string& where) {
  const MemoryEstimate estimate = estimate_training_memory(config, autocast);
  const int64_t needed = estimate.total_bytes();
  const std::string figures = "about " + gib(needed) + " (" + gib(estimate.activation_bytes_per_sample) +
                              " of activations per sample x --micro-batch-size " +
                              std::to_string(estimate.micro_batch_size) + ", plus " + gib(estimate.state_bytes) +
                              " of parameters, gradients and AdamW state)";
  const int64_t room = std::max<int64_t>(0, available_bytes * 8 / 10 - estimate.state_bytes);
  const int64_t fitting = std::max<int64_t>(1, room / std::max<int64_t>(1, estimate.activation_bytes_per_sample));
  const std::string fix = "lower --micro-batch-size to " + std::to_string(fitting) +
                          " or less (raise --global-batch-size to keep the tokens per iteration: the microbatches "
                          "then run one after another), or shorten --seq-length";
  if (needed > available_bytes) {
    throw DataError("this run needs " + figures + ", more than the " + gib(available_bytes) + " available on " + where +
                    "; fix: " + fix);
  }
  if (needed * 10 > available_bytes * 8) {
    return "this run needs " + figures + ", more than 80% of the " + gib(available_bytes) + " available on " + where +
           "; it may run out of memory: " + fix;
  }
  return std::nullopt;
}

}  // namespace graphed::train
