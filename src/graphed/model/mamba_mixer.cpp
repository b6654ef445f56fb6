// model/mamba_mixer.cpp — see model/mamba_mixer.h. The scan runs in fp32 (fp64 in gradient tests)
// whatever autocast gives the projections.
#include "graphed/model/mamba_mixer.h"

#include <cmath>

#include "graphed/kernels/training_ops.h"
#include "graphed/model/ssd_scan.h"
#include "graphed/util/error.h"

namespace graphed::model {
namespace {

at::Tensor as_type(const at::Tensor& tensor, at::ScalarType type) {
  return tensor.scalar_type() == type ? tensor : tensor.to(type);
}

}  // namespace

MambaMixerImpl::MambaMixerImpl(const MambaShape& shape) : whole_shape_(shape), shape_(shape) {
  GRAPHED_INTERNAL_ASSERT(shape.num_heads() >= 1 && shape.num_heads() % shape.num_groups == 0 &&
                              (shape.num_heads_override > 0 || shape.expand * shape.hidden_size % shape.head_dim == 0),
                          "Mamba shape: inner size ", shape.inner_size(), ", head dim ", shape.head_dim, ", groups ",
                          shape.num_groups);
  const int64_t heads = shape.num_heads();
  in_proj_weight_ =
      register_parameter("in_proj_weight", at::randn({shape.in_projection_size(), shape.hidden_size}) * shape.init_std);
  const double bound = 1.0 / std::sqrt(static_cast<double>(shape.conv_width));  // Conv1d's default
  conv_weight_ =
      register_parameter("conv_weight", at::rand({shape.conv_channels(), shape.conv_width}) * 2 * bound - bound);
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

void MambaMixerImpl::split_for_tensor_parallel(const TensorParallel& tensor) {
  GRAPHED_INTERNAL_ASSERT(tensor_.size() == 1, "a Mamba mixer split twice");
  const int64_t size = tensor.size();
  GRAPHED_INTERNAL_ASSERT(whole_shape_.num_heads() % size == 0 && whole_shape_.num_groups % size == 0, "Mamba's ",
                          whole_shape_.num_heads(), " heads and ", whole_shape_.num_groups, " groups over ", size,
                          " tensor-parallel ranks");
  tensor_ = tensor;
  keep_own_shards(*this, tensor_splits(), tensor.shard());
  shape_.num_heads_override = whole_shape_.num_heads() / size;
  shape_.num_groups = whole_shape_.num_groups / size;
}

std::vector<std::pair<std::string, ParameterSplit>> MambaMixerImpl::tensor_splits() const {
  const int64_t inner = whole_shape_.inner_size();
  const int64_t group_state = whole_shape_.num_groups * whole_shape_.state_size;
  ParameterSplit in_proj{TensorSplit::kSegments};  // [z | x | B | C | dt]
  in_proj.segments = {inner, inner, group_state, group_state, whole_shape_.num_heads()};
  ParameterSplit channels{TensorSplit::kSegments};  // [x | B | C]
  channels.segments = {inner, group_state, group_state};
  const ParameterSplit column{TensorSplit::kColumn};  // by heads; the norm's weight by the heads' channels
  return {{"in_proj_weight", in_proj}, {"conv_weight", channels},
          {"conv_bias", channels},     {"dt_bias", column},
          {"A_log", column},           {"D", column},
          {"norm_weight", column},     {"out_proj_weight", {TensorSplit::kRow}}};
}

at::Tensor MambaMixerImpl::project(const at::Tensor& input, const at::Tensor& weight) const {
  return path_->linear(input, weight, at::Tensor());
}

at::Tensor MambaMixerImpl::convolve(const at::Tensor& inputs) const {
  const at::Tensor windows = inputs.unfold(1, shape_.conv_width, 1);      // [b, s, channels, width], a view
  const at::Tensor weight = as_type(conv_weight_, inputs.scalar_type());  // [channels, width]
  return at::silu((windows * weight).sum(-1) + as_type(conv_bias_, inputs.scalar_type()));
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

MambaMixerImpl::Pass MambaMixerImpl::run(const at::Tensor& input, const at::Tensor& history, const at::Tensor& state,
                                         const at::Tensor& valid, bool recurrent) const {
  const int64_t batch = input.size(0);
  const int64_t seq = input.size(1);
  const int64_t inner = shape_.inner_size();
  const int64_t heads = shape_.num_heads();
  const int64_t group_state = shape_.num_groups * shape_.state_size;
  const auto parts = project(input, in_proj_weight_).split({inner, shape_.conv_channels(), heads}, -1);
  const at::ScalarType compute = at::promote_types(input.scalar_type(), at::kFloat);
  const at::Tensor conv_inputs = as_type(parts[1], compute);
  Pass pass;
  pass.convolved = history.defined() ? at::cat({as_type(history, compute), conv_inputs}, 1)
                                     : at::constant_pad_nd(conv_inputs, {0, 0, shape_.conv_width - 1, 0});
  const auto xbc = convolve(pass.convolved).split({inner, group_state, group_state}, -1);
  ScanInputs scan;
  scan.x = xbc[0].reshape({batch, seq, heads, shape_.head_dim});
  scan.b = xbc[1].reshape({batch, seq, shape_.num_groups, shape_.state_size});
  scan.c = xbc[2].reshape({batch, seq, shape_.num_groups, shape_.state_size});
  scan.dt = at::softplus(as_type(parts[2], compute) + as_type(dt_bias_, compute));
  if (valid.defined()) scan.dt = scan.dt * valid.unsqueeze(-1).to(compute);  // dt = 0: the state is left alone
  scan.a = -at::exp(as_type(a_log_, compute));
  scan.initial_state = state;
  const ScanOutput scanned = recurrent ? sequential_scan(scan) : chunked_scan(scan, shape_.chunk_size);
  const at::Tensor y = scanned.y + scan.x * as_type(d_, compute).unsqueeze(-1);
  // Back to the input's dtype for the output projection (what autocast does in training; in inference a
  // bf16 model has no autocast to do it).
  const at::Tensor normed = as_type(gated_norm(y.reshape({batch, seq, inner}), parts[0]), input.scalar_type());
  pass.output = tensor_.leave(project(normed, out_proj_weight_));  // row-parallel: the ranks' parts summed
  pass.final_state = scanned.final_state;
  return pass;
}

at::Tensor MambaMixerImpl::forward(const at::Tensor& input) {
  return run(tensor_.enter(input), at::Tensor(), at::Tensor(), at::Tensor(), /*recurrent=*/false).output;
}

at::Tensor MambaMixerImpl::forward_with_states(const at::Tensor& input, const at::Tensor& valid,
                                               const LayerCache& states) const {
  const LayerCache& cache = states;
  GRAPHED_INTERNAL_ASSERT(cache.conv_state.defined() && cache.ssm_state.defined(), "a Mamba layer without its states");
  const int64_t history = shape_.conv_width - 1;
  if (!valid.defined()) {  // decode: one token per row
    GRAPHED_INTERNAL_ASSERT(input.size(1) == 1, "a decode step of ", input.size(1), " tokens");
    const Pass pass = run(input, cache.conv_state, cache.ssm_state, at::Tensor(), /*recurrent=*/true);
    cache.conv_state.copy_(pass.convolved.narrow(1, 1, history));
    cache.ssm_state.copy_(pass.final_state);
    return pass.output;
  }
  const Pass pass = run(input, cache.conv_state, cache.ssm_state, valid, /*recurrent=*/false);
  // Each row's last `history` conv inputs end at its last valid position: rows [n, n + history) of
  // `convolved`, with n the row's valid count (n = 0 keeps the old history).
  const at::Tensor counts = valid.sum(1, /*keepdim=*/true);                             // [b, 1] int64
  const at::Tensor rows = counts + at::arange(history, counts.options()).unsqueeze(0);  // [b, history]
  const at::Tensor index = rows.unsqueeze(-1).expand({-1, -1, pass.convolved.size(2)});
  cache.conv_state.copy_(pass.convolved.gather(1, index));
  cache.ssm_state.copy_(pass.final_state);
  return pass.output;
}

LayerCache MambaMixerImpl::allocate_states(int64_t slots, const at::TensorOptions& model_options) const {
  const int64_t batch = slots;
  const auto options =
      model_options.dtype(at::promote_types(at::typeMetaToScalarType(model_options.dtype()), at::kFloat));
  LayerCache cache;
  cache.conv_state = at::zeros({batch, shape_.conv_width - 1, shape_.conv_channels()}, options);
  cache.ssm_state = at::zeros({batch, shape_.num_heads(), shape_.head_dim, shape_.state_size}, options);
  return cache;
}

}  // namespace graphed::model
