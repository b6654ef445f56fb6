// model/mamba_mixer.cpp — see model/mamba_mixer.h. The scan runs in fp32 (fp64 in gradient tests)
// whatever autocast gives the projections.
#include "graphed/model/mamba_mixer.h"

#include <cmath>

#include "graphed/model/ssd_scan.h"
#include "graphed/util/error.h"

namespace graphed::model {
namespace {

at::Tensor as_type(const at::Tensor& tensor, at::ScalarType type) {
  return tensor.scalar_type() == type ? tensor : tensor.to(type);
}

}  // namespace

MambaMixerImpl::MambaMixerImpl(const MambaShape& shape) : shape_(shape) {
  GRAPHED_INTERNAL_ASSERT(shape.inner_size() % shape.head_dim == 0 && shape.inner_size() % shape.num_groups == 0 &&
                              shape.num_heads() % shape.num_groups == 0,
                          "Mamba shape: inner size ", shape.inner_size(), ", head dim ", shape.head_dim, ", groups ",
                          shape.num_groups);
  const int64_t heads = shape.num_heads();
  const int64_t projected = 2 * shape.inner_size() + 2 * shape.num_groups * shape.state_size + heads;
  in_proj_weight_ = register_parameter("in_proj_weight", at::randn({projected, shape.hidden_size}) * shape.init_std);
  const double bound = 1.0 / std::sqrt(static_cast<double>(shape.conv_width));  // Conv1d's default
  conv_weight_ = register_parameter("conv_weight", at::rand({shape.conv_channels(), shape.conv_width}) * 2 * bound - bound);
  conv_bias_ = register_parameter("conv_bias", at::rand({shape.conv_channels()}) * 2 * bound - bound);
  const at::Tensor log_dt =
      at::rand({heads}, at::kDouble) * (std::log(shape.dt_max) - std::log(shape.dt_min)) + std::log(shape.dt_min);
  const at::Tensor dt = at::clamp_min(at::exp(log_dt), shape.dt_floor);
  dt_bias_ = register_parameter("dt_bias", (dt + at::log(-at::expm1(-dt))).to(at::kFloat));  // softplus⁻¹(dt)
  a_log_ = register_parameter("A_log", at::log(at::rand({heads}) * 15.0 + 1.0));
  d_ = register_parameter("D", at::ones({heads}));
  norm_weight_ = register_parameter("norm_weight", at::ones({shape.inner_size()}));
  out_proj_weight_ =
      register_parameter("out_proj_weight", at::randn({shape.hidden_size, shape.inner_size()}) * shape.output_init_std);
}

at::Tensor MambaMixerImpl::convolve(const at::Tensor& channels) const {
  const int64_t seq = channels.size(1);
  const at::Tensor input = channels.transpose(1, 2);  // [b, channels, s]
  const at::Tensor weight = as_type(conv_weight_, input.scalar_type()).unsqueeze(1);
  const at::Tensor output = at::conv1d(input, weight, as_type(conv_bias_, input.scalar_type()), {1},
                                       {shape_.conv_width - 1}, {1}, shape_.conv_channels());
  return at::silu(output.narrow(2, 0, seq).transpose(1, 2));  // the first s outputs: position t sees t-3..t
}

at::Tensor MambaMixerImpl::gated_norm(const at::Tensor& y, const at::Tensor& z) const {
  const at::Tensor gated = y * at::silu(as_type(z, y.scalar_type()));
  std::vector<int64_t> grouped = gated.sizes().vec();
  grouped.back() = shape_.num_groups;
  grouped.push_back(shape_.inner_size() / shape_.num_groups);
  const at::Tensor groups = gated.reshape(grouped);
  const at::Tensor normed = groups * at::rsqrt(groups.pow(2).mean(-1, /*keepdim=*/true) + shape_.norm_epsilon);
  return normed.reshape(gated.sizes()) * as_type(norm_weight_, y.scalar_type());
}

at::Tensor MambaMixerImpl::forward(const at::Tensor& input) {
  const int64_t batch = input.size(0);
  const int64_t seq = input.size(1);
  const int64_t inner = shape_.inner_size();
  const int64_t heads = shape_.num_heads();
  const int64_t group_state = shape_.num_groups * shape_.state_size;
  const auto parts = at::linear(input, in_proj_weight_).split({inner, shape_.conv_channels(), heads}, -1);
  const at::ScalarType compute = at::promote_types(input.scalar_type(), at::kFloat);
  const auto xbc = convolve(as_type(parts[1], compute)).split({inner, group_state, group_state}, -1);
  ScanInputs scan;
  scan.x = xbc[0].reshape({batch, seq, heads, shape_.head_dim});
  scan.b = xbc[1].reshape({batch, seq, shape_.num_groups, shape_.state_size});
  scan.c = xbc[2].reshape({batch, seq, shape_.num_groups, shape_.state_size});
  scan.dt = at::softplus(as_type(parts[2], compute) + as_type(dt_bias_, compute));
  scan.a = -at::exp(as_type(a_log_, compute));
  const at::Tensor y = chunked_scan(scan, shape_.chunk_size).y + scan.x * as_type(d_, compute).unsqueeze(-1);
  return at::linear(gated_norm(y.reshape({batch, seq, inner}), parts[0]), out_proj_weight_);
}

}  // namespace graphed::model
