// train/adamw.cpp — see train/adamw.h.
#include "graphed/train/adamw.h"

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
  int64_t moments = 0;
  for (const FlatRange& range : layout.stepped) moments += range.length;
  stepped_ = layout.stepped;
  sharded_ = !(stepped_.size() == 1 && stepped_.front().begin == 0 && stepped_.front().length == layout.elements);
  flat_parameters_ = at::zeros({layout.elements}, options);
  flat_exp_avg_ = at::zeros({moments}, options);
  flat_exp_avg_sq_ = at::zeros({moments}, options);
  if (options_.working_copies) flat_copies_ = at::empty({layout.elements}, options.dtype(*options_.working_copies));
  step_ = steps_.front();
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor& parameter = parameters_[i];
    const auto view = [&](const at::Tensor& flat) {
      return flat.narrow(0, layout.offsets[i], parameter.numel()).view(parameter.sizes());
    };
    view(flat_parameters_).copy_(parameter);
    parameter.set_data(view(flat_parameters_));  // the module's parameter now lives in the flat buffer
    if (!sharded_) {                             // moments element for element beside the parameters
      exp_avgs_.push_back(view(flat_exp_avg_));
      exp_avg_sqs_.push_back(view(flat_exp_avg_sq_));
    }
    steps_[i] = step_;  // one count: every parameter steps together
    if (flat_copies_.defined()) copies_.push_back(view(flat_copies_));
  }
  refresh_working_copies();
}

std::vector<std::pair<at::Tensor, at::Tensor>> AdamW::working_copies() const {
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
  for (std::size_t i = 0; i < copies_.size(); ++i) pairs.emplace_back(parameters_[i], copies_[i]);
  return pairs;
}

void AdamW::refresh_working_copies() {
  at::NoGradGuard no_grad;
  if (flat_copies_.defined()) flat_copies_.copy_(flat_parameters_);
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
      kernels::adamw_step(part(flat_parameters_), part(flat_gradients_), flat_exp_avg_.narrow(0, moment, range.length),
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
