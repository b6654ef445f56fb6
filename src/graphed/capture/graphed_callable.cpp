// capture/graphed_callable.cpp — see capture/graphed_callable.h. The autograd bridge follows
// research/libtorch-graphs.md §3.6–3.7: the state travels as a capsule in saved_data, the surface
// (arguments, then parameters) as an at::TensorList so that autograd sees every tensor as an input.
#include "graphed/capture/graphed_callable.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/custom_function.h>

#include "graphed/util/error.h"

namespace graphed::capture {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Carries the shared state through an IValue capsule.
struct StateHolder : torch::CustomClassHolder {
  explicit StateHolder(std::shared_ptr<GraphedUnitState> s) : state(std::move(s)) {}
  std::shared_ptr<GraphedUnitState> state;
};

void require_captured(const GraphedUnitState& state, const char* when) {
  GRAPHED_CHECK(state.captured, CaptureError, "the graphs of unit ", state.label(), " were deleted (reset) ", when,
                "; fix: capture again (make_graphed_callables) before calling it, and finish every backward pass "
                "before deleting the graphs");
}

struct GraphReplay : torch::autograd::Function<GraphReplay> {
  static variable_list forward(AutogradContext* context, const c10::intrusive_ptr<StateHolder>& holder,
                               at::TensorList surface) {
    GraphedUnitState& state = *holder->state;
    for (std::size_t i = 0; i < state.static_inputs.size(); ++i) {
      if (surface[i].data_ptr() != state.static_inputs[i].data_ptr()) state.static_inputs[i].copy_(surface[i]);
    }
    if (state.forward_draws_random) {
      state.forward_graph.replay();
    } else {
      state.forward_graph.launch_without_random_state();
    }
    variable_list outputs;
    outputs.reserve(state.static_outputs.size());
    for (const at::Tensor& output : state.static_outputs) outputs.push_back(output.detach());
    variable_list constant;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      if (!state.output_requires_grad[i]) constant.push_back(outputs[i]);
    }
    if (!constant.empty()) context->mark_non_differentiable(constant);
    context->set_materialize_grads(false);
    context->saved_data["state"] = c10::IValue::make_capsule(holder);
    return outputs;
  }

  static variable_list backward(AutogradContext* context, variable_list grads) {
    const auto holder = c10::static_intrusive_pointer_cast<StateHolder>(context->saved_data["state"].toCapsule());
    GraphedUnitState& state = *holder->state;
    require_captured(state, "before the backward pass of an earlier call ran");
    GRAPHED_INTERNAL_ASSERT(grads.size() == state.static_outputs.size(), "unit ", state.label(), " got ",
                            grads.size(), " grads for ", state.static_outputs.size(), " outputs");
    for (std::size_t i = 0; i < grads.size(); ++i) {
      at::Tensor& buffer = state.static_grad_outputs[i];
      if (!buffer.defined()) continue;
      if (!grads[i].defined()) {
        buffer.zero_();  // an output nobody used: its grad is zero
      } else if (grads[i].data_ptr() != buffer.data_ptr()) {
        buffer.copy_(grads[i]);
      }
    }
    if (state.parameter_grads_in_graph) {
      for (std::size_t i = 0; i < state.parameters.size(); ++i) {
        const at::Tensor& grad = state.parameters[i].grad();
        GRAPHED_CHECK(grad.defined() && grad.data_ptr() == state.parameter_grad_addresses[i], CaptureError, "unit ",
                      state.label(), ": the grad of parameter '", state.parameter_names[i], "' was ",
                      grad.defined() ? "replaced" : "set to none", " since the capture, but its graph accumulates into "
                      "the old one; fix: zero grads in place (zero_grad without set_to_none), or capture again");
      }
    }
    if (state.backward_draws_random) {
      state.backward_graph.replay();
    } else {
      state.backward_graph.launch_without_random_state();
    }
    variable_list result;
    result.reserve(state.static_grad_inputs.size() + 1);
    result.emplace_back();  // the state holder is not differentiable
    const std::size_t arguments = state.static_inputs.size();
    const std::size_t surface = arguments + (state.parameters_in_surface ? state.parameters.size() : 0);
    for (std::size_t i = 0; i < surface; ++i) {
      const at::Tensor& grad = state.static_grad_inputs[i];
      if (!grad.defined() || (i >= arguments && state.parameter_grads_in_graph)) {
        result.emplace_back();
      } else if (i >= arguments && state.clone_parameter_grads) {
        result.push_back(grad.clone());
      } else {
        result.push_back(grad.detach());
      }
    }
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> UnitArguments::flatten() const {
  std::vector<at::Tensor> flat = positional;
  for (const auto& [name, tensor] : keyword) flat.push_back(tensor);
  return flat;
}

std::vector<std::string> UnitArguments::names(const GraphableUnit& unit) const {
  std::vector<std::string> result;
  for (std::size_t i = 0; i < positional.size(); ++i) {
    result.push_back(i < unit.input_names.size() ? unit.input_names[i] : "argument " + std::to_string(i));
  }
  for (const auto& entry : keyword) result.push_back(entry.first);
  return result;
}

std::string GraphedUnitState::label() const {
  return unit.name + " (microbatch " + std::to_string(microbatch) + ")";
}

std::vector<at::Tensor> GraphedCallable::run(const std::vector<at::Tensor>& inputs) {
  GRAPHED_CHECK(state_->keyword_names.empty(), CaptureError, "unit ", state_->label(),
                " was captured with keyword arguments but called with positional ones only; fix: call it "
                "through GraphedCallable::call with the same keyword arguments");
  return replay(inputs);
}

std::vector<at::Tensor> GraphedCallable::call(const UnitArguments& arguments) {
  std::vector<std::string> names;
  for (const auto& entry : arguments.keyword) names.push_back(entry.first);
  if (names != state_->keyword_names) {
    std::string want, got;
    for (const auto& n : state_->keyword_names) want += (want.empty() ? "" : ", ") + n;
    for (const auto& n : names) got += (got.empty() ? "" : ", ") + n;
    throw CaptureError("unit " + state_->label() + " was called with keyword arguments {" + got +
                           "} but was captured with {" + want + "}",
                       "pass exactly the keyword arguments of the capture");
  }
  return replay(arguments.flatten());
}

std::vector<at::Tensor> GraphedCallable::replay(const std::vector<at::Tensor>& flat_arguments) {
  GraphedUnitState& state = *state_;
  require_captured(state, "before this call");
  check_arguments(state.label(), state.signatures, flat_arguments);
  for (std::size_t i = 0; i < state.parameters.size(); ++i) {
    if (state.parameters[i].data_ptr() != state.parameter_addresses[i]) {
      throw CaptureError("unit " + state.label() + ": parameter '" + state.parameter_names[i] +
                             "' moved to another address since the capture (the model was moved, reloaded into "
                             "new tensors or its parameters were replaced)",
                         "copy new values into the existing parameters in place, or delete the graphs and capture "
                         "again");
    }
  }
  std::vector<at::Tensor> surface = flat_arguments;
  if (state.parameters_in_surface) surface.insert(surface.end(), state.parameters.begin(), state.parameters.end());
  return GraphReplay::apply(c10::make_intrusive<StateHolder>(state_), at::TensorList(surface));
}

void GraphedCallable::reset() {
  GraphedUnitState& state = *state_;
  state.forward_graph.reset();
  state.backward_graph.reset();
  state.static_outputs.clear();
  state.static_grad_outputs.clear();
  state.static_grad_inputs.clear();
  state.static_inputs.clear();
  state.captured = false;
}

MicrobatchRunner::MicrobatchRunner(GraphableUnit unit, std::vector<std::shared_ptr<GraphedCallable>> callables,
                                   std::shared_ptr<const int64_t> microbatch)
    : unit_(std::move(unit)), callables_(std::move(callables)), microbatch_(std::move(microbatch)) {
  GRAPHED_INTERNAL_ASSERT(!callables_.empty() && microbatch_, "a MicrobatchRunner needs callables and a counter");
}

std::vector<at::Tensor> MicrobatchRunner::run(const std::vector<at::Tensor>& inputs) {
  if (!at::GradMode::is_enabled()) return unit_.forward(inputs);
  const auto slots = static_cast<int64_t>(callables_.size());
  return callables_[static_cast<std::size_t>(((*microbatch_ % slots) + slots) % slots)]->run(inputs);
}

}  // namespace graphed::capture
