// model/attention.cpp — see model/attention.h. RoPE rotates the two halves of each head (the
// GPT-NeoX / Llama layout).
#include "graphed/model/attention.h"

#include <cmath>
#include <limits>

#include "graphed/util/compat.h"

namespace graphed::model {

AttentionImpl::AttentionImpl(const AttentionShape& shape)
    : shape_(shape), head_dim_(shape.hidden_size / shape.num_heads) {
  const int64_t qkv_out = (shape.num_heads + 2 * shape.num_query_groups) * head_dim_;
  qkv_weight_ = register_parameter("qkv_weight", at::randn({qkv_out, shape.hidden_size}) * shape.init_std);
  proj_weight_ = register_parameter("proj_weight",
                                    at::randn({shape.hidden_size, shape.hidden_size}) * shape.output_init_std);
  if (shape.bias) {
    qkv_bias_ = register_parameter("qkv_bias", at::zeros({qkv_out}));
    proj_bias_ = register_parameter("proj_bias", at::zeros({shape.hidden_size}));
  }
  if (shape.rope) {
    const at::Tensor inverse_frequency =
        1.0 / at::pow(shape.rotary_base, at::arange(0, head_dim_, 2, at::kDouble) / static_cast<double>(head_dim_));
    const at::Tensor angles = at::outer(at::arange(shape.max_sequence, at::kDouble), inverse_frequency);
    rope_cos_ = register_buffer("rope_cos", angles.cos().to(at::kFloat));
    rope_sin_ = register_buffer("rope_sin", angles.sin().to(at::kFloat));
  }
}

at::Tensor AttentionImpl::apply_rope(const at::Tensor& x, const at::Tensor& positions) const {
  at::Tensor cos, sin;
  if (positions.defined()) {  // [b, s] -> [b, 1, s, d/2]
    cos = rope_cos_.index_select(0, positions.reshape({-1})).view({x.size(0), 1, x.size(2), -1});
    sin = rope_sin_.index_select(0, positions.reshape({-1})).view({x.size(0), 1, x.size(2), -1});
  } else {  // [s, d/2]
    cos = rope_cos_.narrow(0, 0, x.size(2));
    sin = rope_sin_.narrow(0, 0, x.size(2));
  }
  cos = cos.to(x.scalar_type());
  sin = sin.to(x.scalar_type());
  const auto halves = x.chunk(2, -1);
  return at::cat({halves[0] * cos - halves[1] * sin, halves[1] * cos + halves[0] * sin}, -1);
}

AttentionImpl::Projection AttentionImpl::project(const at::Tensor& input, const at::Tensor& positions) const {
  const int64_t batch = input.size(0);
  const int64_t seq = input.size(1);
  const int64_t heads = shape_.num_heads;
  const int64_t groups = shape_.num_query_groups;
  const at::Tensor qkv = at::linear(input, qkv_weight_, qkv_bias_);  // [b, s, (heads + 2 groups) d]
  const auto parts = qkv.split({heads * head_dim_, groups * head_dim_, groups * head_dim_}, -1);
  Projection projection;
  projection.query = parts[0].view({batch, seq, heads, head_dim_}).transpose(1, 2);
  projection.key = parts[1].view({batch, seq, groups, head_dim_}).transpose(1, 2);
  projection.value = parts[2].view({batch, seq, groups, head_dim_}).transpose(1, 2);
  if (shape_.rope) {
    projection.query = apply_rope(projection.query, positions);
    projection.key = apply_rope(projection.key, positions);
  }
  return projection;
}

at::Tensor AttentionImpl::output_projection(const at::Tensor& context) const {
  const int64_t batch = context.size(0);
  const int64_t seq = context.size(2);
  return at::linear(context.transpose(1, 2).reshape({batch, seq, shape_.num_heads * head_dim_}), proj_weight_, proj_bias_);
}

at::Tensor AttentionImpl::forward(const at::Tensor& input) {
  Projection projection = project(input);
  const int64_t ratio = shape_.num_heads / shape_.num_query_groups;
  if (ratio != 1) {
    projection.key = projection.key.repeat_interleave(ratio, 1);
    projection.value = projection.value.repeat_interleave(ratio, 1);
  }
  const double dropout = is_training() ? shape_.attention_dropout : 0.0;
  return output_projection(compat::causal_attention(projection.query, projection.key, projection.value, dropout));
}

at::Tensor AttentionImpl::forward_cached(const at::Tensor& input, const at::Tensor& positions,
                                         const at::Tensor& blocked, const LayerCache& cache) const {
  const int64_t batch = input.size(0);
  const int64_t seq = input.size(1);
  const int64_t groups = shape_.num_query_groups;
  const int64_t ratio = shape_.num_heads / groups;
  const Projection projection = project(input, positions);
  const at::Tensor slots = positions.view({batch, 1, seq, 1}).expand({batch, groups, seq, head_dim_});
  cache.key.scatter_(2, slots, projection.key);
  cache.value.scatter_(2, slots, projection.value);
  // Queries of one group side by side: [b, groups, ratio * s, d] against the group's keys [b, groups, L, d].
  const at::Tensor query = projection.query.reshape({batch, groups, ratio * seq, head_dim_});
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  at::Tensor scores = at::matmul(query, cache.key.transpose(-2, -1)) * scale;  // [b, groups, ratio * s, L]
  scores = scores.view({batch, groups, ratio, seq, -1})
               .masked_fill(blocked.view({batch, 1, 1, seq, -1}), -std::numeric_limits<double>::infinity());
  const at::Tensor probabilities =
      at::softmax(scores, -1, at::promote_types(scores.scalar_type(), at::kFloat)).to(query.scalar_type());
  const at::Tensor context = at::matmul(probabilities.view({batch, groups, ratio * seq, -1}), cache.value);
  return output_projection(context.view({batch, shape_.num_heads, seq, head_dim_}));
}

}  // namespace graphed::model
