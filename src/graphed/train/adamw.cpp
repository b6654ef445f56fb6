// train/adamw.cpp — see train/adamw.h.
#include "graphed/train/adamw.h"

#include "graphed/kernels/training_ops.h"
#include "graphed/util/compat.h"

namespace graphed::train {

AdamW::AdamW(std::vector<std::pair<std::string, at::Tensor>> named_parameters, const AdamWOptions& options)
    : options_(options) {
  at::NoGradGuard no_grad;
  // One flat gradient buffer when every parameter shares a dtype and device and has no grad yet.
  bool flat = !named_parameters.empty();
  int64_t elements = 0;
  for (const auto& [name, parameter] : named_parameters) {
    const at::Tensor& first = named_parameters.front().second;
    flat = flat && !parameter.grad().defined() && parameter.scalar_type() == first.scalar_type() &&
           parameter.device() == first.device();
    elements += parameter.numel();
  }
  if (flat) flat_gradients_ = at::zeros({elements}, named_parameters.front().second.options());
  int64_t offset = 0;
  for (auto& [name, parameter] : named_parameters) {
    names_.push_back(name);
    parameters_.push_back(parameter);
    if (flat) {
      parameter.mutable_grad() = flat_gradients_.narrow(0, offset, parameter.numel()).view(parameter.sizes());
      offset += parameter.numel();
    } else if (!parameter.grad().defined()) {
      parameter.mutable_grad() = at::zeros_like(parameter);
    }
    gradients_.push_back(parameter.grad());
    if (!(flat && options.working_copies)) {  // else views of flat moments (make_flat_state)
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
  if (flat && options.working_copies) make_flat_state(elements);
}

void AdamW::make_flat_state(int64_t elements) {
  const at::TensorOptions options = parameters_.front().options();
  flat_parameters_ = at::empty({elements}, options);
  flat_exp_avg_ = at::zeros({elements}, options);
  flat_exp_avg_sq_ = at::zeros({elements}, options);
  flat_copies_ = at::empty({elements}, options.dtype(*options_.working_copies));
  step_ = steps_.front();
  int64_t offset = 0;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor& parameter = parameters_[i];
    const auto view = [&](const at::Tensor& flat) {
      return flat.narrow(0, offset, parameter.numel()).view(parameter.sizes());
    };
    view(flat_parameters_).copy_(parameter);
    parameter.set_data(view(flat_parameters_));  // the module's parameter now lives in the flat buffer
    exp_avgs_.push_back(view(flat_exp_avg_));
    exp_avg_sqs_.push_back(view(flat_exp_avg_sq_));
    steps_[i] = step_;  // one count: every parameter steps together
    copies_.push_back(view(flat_copies_));
    offset += parameter.numel();
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
    kernels::adamw_step(flat_parameters_, flat_gradients_, flat_exp_avg_, flat_exp_avg_sq_, flat_copies_, lr_, step_,
                        grad_scale, settings);
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

at::Tensor AdamW::gradient_norm() const {
  if (flat_gradients_.defined()) return flat_gradients_.norm().to(at::kFloat);
  return at::stack(at::_foreach_norm(gradients_, 2)).norm().to(at::kFloat);
}

std::vector<std::pair<std::string, at::Tensor>> AdamW::state() {
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
