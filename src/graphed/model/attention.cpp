// model/attention.cpp — see model/attention.h. RoPE rotates the two halves of each head (the
// GPT-NeoX / Llama layout).
#include "graphed/model/attention.h"

#include <cmath>

#include <ATen/core/grad_mode.h>

#include "graphed/kernels/paged_attention_ops.h"
#include "graphed/kernels/training_ops.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"

namespace graphed::model {

at::Tensor rope_inverse_frequencies(const AttentionShape& shape, int64_t head_dim) {
  at::Tensor inverse_frequency =
      1.0 / at::pow(shape.rotary_base, at::arange(0, head_dim, 2, at::kDouble) / static_cast<double>(head_dim));
  if (!shape.rope_scaling) return inverse_frequency;
  // Hugging Face's _compute_llama3_parameters (modeling_rope_utils.py), in float64.
  const RopeScaling& scaling = shape.rope_scaling_options;
  const double original = static_cast<double>(scaling.original_max_positions);
  const double low_frequency_wavelength = original / scaling.low_freq_factor;
  const double high_frequency_wavelength = original / scaling.high_freq_factor;
  const at::Tensor wavelength = 2.0 * M_PI / inverse_frequency;
  // Long wavelengths (low frequencies) are divided by the factor, short ones kept.
  const at::Tensor scaled =
      at::where(wavelength > low_frequency_wavelength, inverse_frequency / scaling.factor, inverse_frequency);
  // Those between are interpolated between the two.
  const at::Tensor smooth =
      (original / wavelength - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor);
  const at::Tensor smoothed = (1.0 - smooth) * scaled / scaling.factor + smooth * scaled;
  const at::Tensor medium =
      (wavelength >= high_frequency_wavelength).logical_and(wavelength <= low_frequency_wavelength);
  return at::where(medium, smoothed, scaled);
}

AttentionImpl::AttentionImpl(const AttentionShape& shape)
    : shape_(shape),
      head_dim_(shape.head_dim > 0 ? shape.head_dim : shape.hidden_size / shape.num_heads),
      heads_(shape.num_heads),
      groups_(shape.num_query_groups) {
  const int64_t qkv_out = (shape.num_heads + 2 * shape.num_query_groups) * head_dim_;
  const int64_t context = shape.num_heads * head_dim_;
  qkv_weight_ = register_parameter("qkv_weight", at::randn({qkv_out, shape.hidden_size}) * shape.init_std);
  proj_weight_ = register_parameter("proj_weight", at::randn({shape.hidden_size, context}) * shape.output_init_std);
  if (shape.bias || shape.qkv_bias) qkv_bias_ = register_parameter("qkv_bias", at::zeros({qkv_out}));
  if (shape.bias) proj_bias_ = register_parameter("proj_bias", at::zeros({shape.hidden_size}));
  if (shape.qk_norm) {
    const int64_t across = shape.qk_norm_across_heads;
    const int64_t q_width = across ? shape.num_heads * head_dim_ : head_dim_;
    const int64_t k_width = across ? shape.num_query_groups * head_dim_ : head_dim_;
    q_norm_ = register_module("q_norm", Norm(q_width, shape.rms_norm, shape.norm_epsilon));
    k_norm_ = register_module("k_norm", Norm(k_width, shape.rms_norm, shape.norm_epsilon));
  }
  if (shape.rope) {
    const at::Tensor inverse_frequency = rope_inverse_frequencies(shape, head_dim_);
    const at::Tensor angles = at::outer(at::arange(shape.max_sequence, at::kDouble), inverse_frequency);
    rope_cos_ = register_buffer("rope_cos", angles.cos().to(at::kFloat));
    rope_sin_ = register_buffer("rope_sin", angles.sin().to(at::kFloat));
  }
}

void AttentionImpl::use_kernel_path(std::shared_ptr<const KernelPath> path) {
  path_ = std::move(path);
  if (q_norm_) q_norm_->use_kernel_path(path_);
  if (k_norm_) k_norm_->use_kernel_path(path_);
}

void AttentionImpl::split_for_tensor_parallel(const TensorParallel& tensor) {
  GRAPHED_INTERNAL_ASSERT(tensor_.size() == 1, "an attention split twice");
  GRAPHED_CHECK(!shape_.qk_norm_across_heads || tensor.size() == 1, ConfigError,
                "q/k norms across every head (--qk-layernorm-across-heads, OLMoE) cannot be split over ", tensor.size(),
                " tensor-parallel ranks; fix: --tensor-model-parallel-size 1");
  tensor_ = tensor;
  keep_own_shards(*this, tensor_splits(), tensor.shard());
  heads_ = shape_.num_heads / tensor.size();
  groups_ = shape_.num_query_groups / tensor.size();
}

std::vector<std::pair<std::string, ParameterSplit>> AttentionImpl::tensor_splits() const {
  ParameterSplit qkv{TensorSplit::kQkv};
  qkv.heads = shape_.num_heads;
  qkv.groups = shape_.num_query_groups;
  qkv.head_dim = head_dim_;
  std::vector<std::pair<std::string, ParameterSplit>> splits = {{"qkv_weight", qkv},
                                                                {"proj_weight", {TensorSplit::kRow}}};
  if (qkv_bias_.defined()) splits.emplace_back("qkv_bias", qkv);
  if (proj_bias_.defined()) splits.emplace_back("proj_bias", ParameterSplit{TensorSplit::kFirstRank});
  if (shape_.qk_norm) {  // one norm for every head: each rank's gradient covers its heads only
    for (const char* norm : {"q_norm", "k_norm"}) {
      const Norm& module = std::string(norm) == "q_norm" ? q_norm_ : k_norm_;
      for (const auto& item : module->named_parameters()) {
        splits.emplace_back(std::string(norm) + "." + item.key(), ParameterSplit{TensorSplit::kSummed});
      }
    }
  }
  return splits;
}

at::Tensor AttentionImpl::project_linear(const at::Tensor& input, const at::Tensor& weight,
                                         const at::Tensor& bias) const {
  // Inference: a single row (a batch-1 decode step) through the one-row kernel where the path has it.
  if (!at::GradMode::is_enabled()) return path_->inference_linear(input, weight, bias);
  return path_->linear(input, weight, bias);
}

at::Tensor AttentionImpl::apply_rope(const at::Tensor& x, const at::Tensor& positions) const {
  if (!positions.defined()) {  // positions 0..s-1: training and prefill
    return path_->rope(x, rope_cos_, rope_sin_);
  }
  // Each row's own positions [b, s] -> [b, 1, s, d/2].
  const at::Tensor cos = rope_cos_.index_select(0, positions.reshape({-1})).view({x.size(0), 1, x.size(2), -1});
  const at::Tensor sin = rope_sin_.index_select(0, positions.reshape({-1})).view({x.size(0), 1, x.size(2), -1});
  return kernels::reference::rotate_halves(x, cos.to(x.scalar_type()), sin.to(x.scalar_type()));
}

AttentionImpl::Projection AttentionImpl::project(const at::Tensor& input, const at::Tensor& positions) const {
  // [b, s, (heads + 2 groups) d]; the whole sequence also where the input is a sequence part
  return split_projection(project_linear(tensor_.enter(input), qkv_weight_, qkv_bias_), positions);
}

AttentionImpl::Projection AttentionImpl::split_projection(const at::Tensor& qkv, const at::Tensor& positions) const {
  const int64_t heads = heads_;
  const int64_t groups = groups_;
  const int64_t batch = qkv.size(0);
  const int64_t seq = qkv.size(1);
  auto parts = qkv.split({heads * head_dim_, groups * head_dim_, groups * head_dim_}, -1);
  if (shape_.qk_norm_across_heads) {  // OLMoE: the norms see every head's queries (keys) at once
    parts[0] = q_norm_->forward(parts[0].contiguous());
    parts[1] = k_norm_->forward(parts[1].contiguous());
  }
  Projection projection;
  projection.query = parts[0].reshape({batch, seq, heads, head_dim_}).transpose(1, 2);
  projection.key = parts[1].reshape({batch, seq, groups, head_dim_}).transpose(1, 2);
  projection.value = parts[2].view({batch, seq, groups, head_dim_}).transpose(1, 2);
  if (shape_.qk_norm && !shape_.qk_norm_across_heads) {
    projection.query = q_norm_->forward(projection.query);
    projection.key = k_norm_->forward(projection.key);
  }
  if (shape_.rope) {
    projection.query = apply_rope(projection.query, positions);
    projection.key = apply_rope(projection.key, positions);
  }
  return projection;
}

at::Tensor AttentionImpl::output_projection(const at::Tensor& context, const at::Tensor& residual) const {
  const int64_t batch = context.size(0);
  const int64_t seq = context.size(2);
  const at::Tensor flat = context.transpose(1, 2).reshape({batch, seq, heads_ * head_dim_});
  // Row-parallel: the bias (and the residual) go in once, on the first rank, before the ranks' sum.
  const at::Tensor bias = tensor_.on_first_rank(proj_bias_);
  if (residual.defined()) {
    return tensor_.leave(path_->decode_linear(flat, proj_weight_, bias, {}, tensor_.on_first_rank(residual)));
  }
  return tensor_.leave(project_linear(flat, proj_weight_, bias));
}

at::Tensor AttentionImpl::forward(const at::Tensor& input) { return attend(project(input)); }

NormedLinear AttentionImpl::forward_from_stream(const at::Tensor& hidden, const NormImpl& norm) {
  // With tensor parallelism the norm's output enters the tensor region first; without autograd the projection
  // takes its inference form.
  if (tensor_.size() > 1 || !at::GradMode::is_enabled()) {
    const kernels::NormedStream input = norm.forward_stream(hidden);
    return {input.stream, forward(input.normed)};
  }
  const NormedLinear projected = norm.stream_then_linear(hidden, qkv_weight_, qkv_bias_);
  return {projected.stream, attend(split_projection(projected.output, {}))};
}

at::Tensor AttentionImpl::attend(Projection projection) {
  const int64_t ratio = heads_ / groups_;
  if (ratio != 1) {
    projection.key = projection.key.repeat_interleave(ratio, 1);
    projection.value = projection.value.repeat_interleave(ratio, 1);
  }
  const double dropout = is_training() ? shape_.attention_dropout : 0.0;
  if (dropout == 0.0)
    return output_projection(compat::causal_attention(projection.query, projection.key, projection.value, 0.0));
  // This rank's heads draw their own masks (Megatron's model-parallel RNG rule).
  return output_projection(tensor_.with_rank_random(
      [&] { return compat::causal_attention(projection.query, projection.key, projection.value, dropout); }));
}

LayerCache AttentionImpl::allocate_paged_cache(int64_t blocks, int64_t block_size,
                                               const at::TensorOptions& options) const {
  LayerCache cache;
  cache.key = at::zeros({blocks, block_size, groups_, head_dim_}, options);
  cache.value = at::zeros_like(cache.key);
  return cache;
}

at::Tensor AttentionImpl::prefill_attention(const at::Tensor& query, const PrefillSegment& segment,
                                            const PagedBatch& batch, const LayerCache& cache) const {
  const int64_t groups = groups_;
  const int64_t ratio = heads_ / groups;
  const int64_t context = segment.first_position + segment.length;
  const int64_t blocks = (context + batch.block_size - 1) / batch.block_size;
  const at::Tensor block_ids = batch.context.block_tables[segment.request].narrow(0, 0, blocks);
  const auto gather = [&](const at::Tensor& paged) {  // [1, heads, context, d]
    at::Tensor rows = paged.index_select(0, block_ids).view({blocks * batch.block_size, groups, head_dim_});
    rows = rows.narrow(0, 0, context).transpose(0, 1);
    if (ratio != 1) rows = rows.repeat_interleave(ratio, 0);
    return rows.unsqueeze(0);
  };
  const at::Tensor keys = gather(cache.key);
  const at::Tensor values = gather(cache.value);
  const at::Tensor q = query.unsqueeze(0);
  if (segment.first_position == 0) return compat::causal_attention(q, keys, values, 0.0)[0];
  // A later chunk: query i sits at first_position + i and sees the context up to there.
  const at::Tensor rows = at::arange(segment.length, batch.slots.options()).view({-1, 1}) + segment.first_position;
  const at::Tensor allowed = at::arange(context, batch.slots.options()).view({1, -1}) <= rows;
  return compat::masked_attention(q, keys, values, allowed)[0];
}

at::Tensor AttentionImpl::paged_query(const at::Tensor& hidden, const NormImpl& norm, const PagedBatch& batch,
                                      const LayerCache& cache) const {
  const int64_t tokens = hidden.size(1);
  if (shape_.qk_norm) {  // the q/k norms stand between the projection and RoPE
    const Projection projection = project(norm.forward_inference(hidden), batch.context.positions.view({1, tokens}));
    cache.key.view({-1, groups_, head_dim_}).index_copy_(0, batch.slots, projection.key[0].transpose(0, 1));
    cache.value.view({-1, groups_, head_dim_}).index_copy_(0, batch.slots, projection.value[0].transpose(0, 1));
    return projection.query[0].transpose(0, 1).contiguous();
  }
  PagedCacheWrite write;  // norm + QKV, then RoPE + the cache write
  write.positions = batch.context.positions;
  write.cache_rows = batch.slots;
  write.cos = rope_cos_;
  write.sin = rope_sin_;
  write.key_cache = cache.key;
  write.value_cache = cache.value;
  write.heads = heads_;
  write.groups = groups_;
  write.head_dim = head_dim_;
  return path_->rope_into_paged_cache(norm.then_linear(hidden, qkv_weight_, qkv_bias_).view({tokens, -1}), write);
}

at::Tensor AttentionImpl::forward_paged(const at::Tensor& hidden, const NormImpl& norm, const PagedBatch& batch,
                                        const LayerCache& cache) const {
  const at::Tensor query = paged_query(hidden, norm, batch, cache);  // [tokens, heads, d]
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  at::Tensor context;
  if (batch.segments.empty()) {
    context = path_->paged_attention(query, cache.key, cache.value, batch.context, scale);
  } else {
    std::vector<at::Tensor> parts;
    const int64_t decode = batch.decode_tokens;
    if (decode > 0) {
      kernels::PagedContext decode_context = batch.context;
      decode_context.tiles = at::Tensor();  // the prompt tokens go to dense attention below
      decode_context.token_request = batch.context.token_request.narrow(0, 0, decode);
      decode_context.positions = batch.context.positions.narrow(0, 0, decode);
      parts.push_back(
          path_->paged_attention(query.narrow(0, 0, decode), cache.key, cache.value, decode_context, scale));
    }
    for (const PrefillSegment& segment : batch.segments) {
      const at::Tensor segment_query = query.narrow(0, segment.first_token, segment.length).transpose(0, 1);
      parts.push_back(prefill_attention(segment_query, segment, batch, cache).transpose(0, 1));
    }
    context = parts.size() == 1 ? parts[0] : at::cat(parts, 0);
  }
  // [tokens, heads, d] -> [1, heads, tokens, d] -> [1, tokens, h], plus the residual
  return output_projection(context.transpose(0, 1).unsqueeze(0), hidden);
}

}  // namespace graphed::model
