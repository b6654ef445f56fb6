// train/adamw.cpp — see train/adamw.h.
#include "graphed/train/adamw.h"

#include <algorithm>

#include "graphed/kernels/training_ops.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"

namespace graphed::train {

namespace {

/// The parameters one after another, every element stepped: the layout without a distributed optimizer.
FlatLayout consecutive_layout(const std::vector<std::pair<std::string, at::Tensor>>& named_parameters) {
  FlatLayout layout;
  for (const auto& [name, parameter] : named_parameters) {
    layout.offsets.push_back(layout.elements);
    layout.elements += parameter.numel();
  }
  layout.stepped.push_back({0, layout.elements});
  return layout;
}

}  // namespace

AdamW::AdamW(std::vector<std::pair<std::string, at::Tensor>> named_parameters, const AdamWOptions& options)
    : options_(options) {
  at::NoGradGuard no_grad;
  // One flat gradient buffer when every parameter shares a dtype and device and has no grad yet.
  bool flat = !named_parameters.empty();
  for (const auto& [name, parameter] : named_parameters) {
    const at::Tensor& first = named_parameters.front().second;
    flat = flat && !parameter.grad().defined() && parameter.scalar_type() == first.scalar_type() &&
           parameter.device() == first.device();
  }
  const FlatLayout layout = options.flat_layout.value_or(consecutive_layout(named_parameters));
  GRAPHED_INTERNAL_ASSERT(flat || !options.flat_layout,
                          "a FlatLayout needs parameters of one dtype and device that have no gradient yet");
  GRAPHED_INTERNAL_ASSERT(layout.offsets.size() == named_parameters.size(), "a FlatLayout of ", layout.offsets.size(),
                          " parameters for ", named_parameters.size());
  const bool flat_state = flat && (options.working_copies || options.flat_layout);
  // Padding between the parameters stays zero (AdamW on a zero with a zero gradient writes zero).
  if (flat) flat_gradients_ = at::zeros({layout.elements}, named_parameters.front().second.options());
  for (std::size_t i = 0; i < named_parameters.size(); ++i) {
    auto& [name, parameter] = named_parameters[i];
    names_.push_back(name);
    parameters_.push_back(parameter);
    if (flat) {
      parameter.mutable_grad() =
          flat_gradients_.narrow(0, layout.offsets[i], parameter.numel()).view(parameter.sizes());
    } else if (!parameter.grad().defined()) {
      parameter.mutable_grad() = at::zeros_like(parameter);
    }
    gradients_.push_back(parameter.grad());
    if (!flat_state) {  // else views of flat moments (make_flat_state)
      exp_avgs_.push_back(at::zeros_like(parameter));
      exp_avg_sqs_.push_back(at::zeros_like(parameter));
    }
    // The fused CUDA kernel reads float32 steps; elsewhere the step keeps the parameter's precision.
    steps_.push_back(
        at::zeros({}, parameter.options().dtype(parameter.is_cuda() ? at::kFloat : parameter.scalar_type())));
  }
  const auto device = parameters_.empty() ? at::Device(at::kCPU) : parameters_.front().device();
  lr_ = at::zeros({}, at::TensorOptions().device(device).dtype(at::kDouble));
  if (device.is_cuda()) lr_ = lr_.to(at::kFloat);  // the fused kernel reads a float lr tensor
  if (flat_state) make_flat_state(layout);
}

void AdamW::make_flat_state(const FlatLayout& layout) {
  const at::TensorOptions options = parameters_.front().options();
  int64_t moments = 0, released_moments = 0;
  for (const FlatRange& range : layout.stepped) {
    moments += range.length;
    if (range.begin < layout.sharded_masters) released_moments += range.length;
  }
  GRAPHED_INTERNAL_ASSERT(layout.sharded_masters == 0 || options_.working_copies,
                          "released parameters without working copies to read them through");
  for (std::size_t r = 0; r < layout.stepped.size(); ++r) {
    const FlatRange& range = layout.stepped[r];
    GRAPHED_INTERNAL_ASSERT(
        range.begin >= layout.sharded_masters || range.begin + range.length <= layout.sharded_masters,
        "a stepped range across the released parameters' end");
    GRAPHED_INTERNAL_ASSERT(
        r == 0 || range.begin >= layout.sharded_masters || layout.stepped[r - 1].begin < layout.sharded_masters,
        "the released ranges must come first among the stepped ones");
  }
  stepped_ = layout.stepped;
  offsets_ = layout.offsets;
  sharded_masters_ = layout.sharded_masters;
  sharded_ = !(stepped_.size() == 1 && stepped_.front().begin == 0 && stepped_.front().length == layout.elements);
  flat_parameters_ = at::zeros({layout.elements - sharded_masters_}, options);
  master_shards_ = at::zeros({released_moments}, options);
  flat_exp_avg_ = at::zeros({moments}, options);
  flat_exp_avg_sq_ = at::zeros({moments}, options);
  if (options_.working_copies) flat_copies_ = at::zeros({layout.elements}, options.dtype(*options_.working_copies));
  step_ = steps_.front();
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    place_parameter(i, layout);
    if (!sharded_) {  // moments element for element beside the parameters
      exp_avgs_.push_back(flat_exp_avg_.narrow(0, offsets_[i], parameters_[i].numel()).view(parameters_[i].sizes()));
      exp_avg_sqs_.push_back(
          flat_exp_avg_sq_.narrow(0, offsets_[i], parameters_[i].numel()).view(parameters_[i].sizes()));
    }
    steps_[i] = step_;  // one count: every parameter steps together
    if (flat_copies_.defined())
      copies_.push_back(flat_copies_.narrow(0, offsets_[i], parameters_[i].numel()).view(parameters_[i].sizes()));
  }
  refresh_working_copies();
}

void AdamW::place_parameter(std::size_t i, const FlatLayout& layout) {
  at::Tensor& parameter = parameters_[i];
  const int64_t offset = layout.offsets[i], count = parameter.numel();
  const bool release = offset < sharded_masters_;
  released_.push_back(release);
  if (!release) {  // the module's parameter now lives in the flat buffer
    at::Tensor view = flat_parameters_.narrow(0, offset - sharded_masters_, count).view(parameter.sizes());
    view.copy_(parameter);
    parameter.set_data(view);
    return;
  }
  // Its copy whole, its fp32 values in the stepped ranges it meets; then it keeps its shape but no storage.
  write_released(i, parameter);
  at::Tensor released = at::empty({0}, parameter.options());
  released.unsafeGetTensorImpl()->set_sizes_contiguous(parameter.sizes());
  parameter.set_data(released);
}

void AdamW::write_released(std::size_t index, const at::Tensor& values) {
  at::NoGradGuard no_grad;
  GRAPHED_INTERNAL_ASSERT(released(index), "parameter ", index, " is not released");
  const int64_t offset = offsets_[index], count = values.numel();
  const at::Tensor flat = values.reshape({-1});
  flat_copies_.narrow(0, offset, count).copy_(flat);
  int64_t moment = 0;
  for (const FlatRange& range : stepped_) {
    const int64_t begin = std::max(range.begin, offset), end = std::min(range.begin + range.length, offset + count);
    if (end > begin) {
      master_shards_.narrow(0, moment + begin - range.begin, end - begin)
          .copy_(flat.narrow(0, begin - offset, end - begin));
    }
    moment += range.length;
  }
}

at::Tensor AdamW::masters_of(const FlatRange& range, int64_t moment) const {
  if (range.begin < sharded_masters_) return master_shards_.narrow(0, moment, range.length);
  return flat_parameters_.narrow(0, range.begin - sharded_masters_, range.length);
}

std::vector<std::pair<at::Tensor, at::Tensor>> AdamW::working_copies() const {
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
  for (std::size_t i = 0; i < copies_.size(); ++i) pairs.emplace_back(parameters_[i], copies_[i]);
  return pairs;
}

void AdamW::refresh_working_copies() {
  at::NoGradGuard no_grad;  // the released parameters' copies are written where their values come from
  if (flat_copies_.defined())
    flat_copies_.narrow(0, sharded_masters_, flat_parameters_.numel()).copy_(flat_parameters_);
}

void AdamW::set_learning_rate(double lr) { lr_.fill_(lr); }

void AdamW::step(const std::optional<at::Tensor>& grad_scale) {
  if (flat_parameters_.defined()) {
    step_.add_(1);
    kernels::AdamWSettings settings{options_.beta1, options_.beta2, options_.eps, options_.weight_decay};
    int64_t moment = 0;  // where the range's moments start
    for (const FlatRange& range : stepped_) {
      const auto part = [&](const at::Tensor& flat) { return flat.narrow(0, range.begin, range.length); };
      const at::Tensor copies = flat_copies_.defined() ? part(flat_copies_) : at::Tensor();
      kernels::adamw_step(masters_of(range, moment), part(flat_gradients_),
                          flat_exp_avg_.narrow(0, moment, range.length),
                          flat_exp_avg_sq_.narrow(0, moment, range.length), copies, lr_, step_, grad_scale, settings);
      moment += range.length;
    }
    return;
  }
  compat::adamw_step(parameters_, gradients_, exp_avgs_, exp_avg_sqs_, steps_, lr_, options_.beta1, options_.beta2,
                     options_.weight_decay, options_.eps, grad_scale);
}

void AdamW::zero_grad() {
  if (flat_gradients_.defined()) {
    flat_gradients_.zero_();
  } else {
    at::_foreach_zero_(gradients_);
  }
}

int64_t AdamW::master_bytes() const {
  if (!flat_parameters_.defined()) {
    int64_t bytes = 0;
    for (const at::Tensor& parameter : parameters_)
      bytes += parameter.numel() * static_cast<int64_t>(parameter.element_size());
    return bytes;
  }
  return (flat_parameters_.numel() + master_shards_.numel()) * static_cast<int64_t>(flat_parameters_.element_size());
}

int64_t AdamW::moment_bytes() const {
  if (flat_exp_avg_.defined()) return 2 * flat_exp_avg_.numel() * static_cast<int64_t>(flat_exp_avg_.element_size());
  int64_t bytes = 0;
  for (std::size_t i = 0; i < exp_avgs_.size(); ++i)
    bytes += (exp_avgs_[i].numel() + exp_avg_sqs_[i].numel()) * static_cast<int64_t>(exp_avgs_[i].element_size());
  return bytes;
}

at::Tensor AdamW::gradient_norm() const {
  if (flat_gradients_.defined()) return flat_gradients_.norm().to(at::kFloat);
  return at::stack(at::_foreach_norm(gradients_, 2)).norm().to(at::kFloat);
}

std::vector<std::pair<std::string, at::Tensor>> AdamW::state() {
  GRAPHED_INTERNAL_ASSERT(!sharded_, "AdamW::state() of a sharded optimizer (gather it: train/gradient_shards.h)");
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    tensors.emplace_back(names_[i] + ".exp_avg", exp_avgs_[i]);
    tensors.emplace_back(names_[i] + ".exp_avg_sq", exp_avg_sqs_[i]);
    tensors.emplace_back(names_[i] + ".step", steps_[i]);
  }
  tensors.emplace_back("lr", lr_);
  return tensors;
}

}  // namespace graphed::train
