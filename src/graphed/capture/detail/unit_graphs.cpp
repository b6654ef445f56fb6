// capture/detail/unit_graphs.cpp — see capture/detail/unit_graphs.h. The autograd bridge follows
// research/libtorch-graphs.md §3.6–3.7: the state travels as a capsule in saved_data, the surface
// (arguments, then parameters) as an at::TensorList so that autograd sees every tensor as an input.
#include "graphed/capture/detail/unit_graphs.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <map>

#include "graphed/capture/random_states.h"
#include "graphed/util/error.h"

namespace graphed::capture::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// A parameter's address, or null for one without values of its own (released: its values live elsewhere, as the
/// distributed optimizer keeps them, and the graphs read it only through a copy).
const void* address_of(const at::Tensor& parameter) {
  return parameter.numel() > 0 && parameter.storage().nbytes() == 0 ? nullptr : parameter.data_ptr();
}

/// Outputs needing grad and the surface entries to differentiate, for one state.
struct GradientProblem {
  std::vector<at::Tensor> outputs;
  std::vector<std::size_t> output_index;
  std::vector<at::Tensor> inputs;
  std::vector<std::size_t> input_index;  ///< into the surface
};

GradientProblem gradient_problem(const std::vector<at::Tensor>& surface, const std::vector<bool>& needs_grad,
                                 const std::vector<at::Tensor>& outputs) {
  GradientProblem problem;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].defined() && outputs[i].requires_grad()) {
      problem.outputs.push_back(outputs[i]);
      problem.output_index.push_back(i);
    }
  }
  for (std::size_t i = 0; i < surface.size(); ++i) {
    if (needs_grad[i]) {
      problem.inputs.push_back(surface[i]);
      problem.input_index.push_back(i);
    }
  }
  return problem;
}

/// Drops parameters (by index, ascending) from every per-parameter list of the state.
void drop_parameters(GraphedUnitState& state, const std::vector<std::size_t>& unused) {
  const std::size_t arguments = state.static_inputs.size();
  for (auto it = unused.rbegin(); it != unused.rend(); ++it) {
    const auto at = static_cast<std::ptrdiff_t>(*it);
    state.parameters.erase(state.parameters.begin() + at);
    state.parameter_names.erase(state.parameter_names.begin() + at);
    state.accumulate_in_graph.erase(state.accumulate_in_graph.begin() + at);
    state.needs_grad.erase(state.needs_grad.begin() + static_cast<std::ptrdiff_t>(arguments) + at);
  }
}

void require_captured(const GraphedUnitState& state, const char* when) {
  GRAPHED_CHECK(state.captured, CaptureError, "the graphs of unit ", state.label(), " were deleted (reset) ", when,
                "; fix: capture again before calling it, and finish every backward pass before deleting the graphs");
}

/// Carries the shared state through an IValue capsule.
struct StateHolder : torch::CustomClassHolder {
  explicit StateHolder(std::shared_ptr<GraphedUnitState> s) : state(std::move(s)) {}
  std::shared_ptr<GraphedUnitState> state;
};

void launch(CudaGraph& graph, bool draws_random) {
  if (draws_random) {
    graph.replay();
  } else {
    graph.launch_without_random_state();
  }
}

struct GraphReplay : torch::autograd::Function<GraphReplay> {
  static variable_list forward(AutogradContext* context, const c10::intrusive_ptr<StateHolder>& holder,
                               at::TensorList surface) {
    GraphedUnitState& state = *holder->state;
    for (std::size_t i = 0; i < state.static_inputs.size(); ++i) {
      if (surface[i].data_ptr() != state.static_inputs[i].data_ptr()) state.static_inputs[i].copy_(surface[i]);
    }
    launch(state.forward_graph, state.forward_draws_random);
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
    GRAPHED_INTERNAL_ASSERT(grads.size() == state.static_outputs.size(), "unit ", state.label(), " got ", grads.size(),
                            " grads for ", state.static_outputs.size(), " outputs");
    for (std::size_t i = 0; i < grads.size(); ++i) {
      at::Tensor& buffer = state.static_grad_outputs[i];
      if (!buffer.defined()) continue;
      if (!grads[i].defined()) {
        buffer.zero_();  // an output nobody used: its grad is zero
      } else if (grads[i].data_ptr() != buffer.data_ptr()) {
        buffer.copy_(grads[i]);
      }
    }
    for (std::size_t i = 0; i < state.parameters.size(); ++i) {
      if (!state.accumulate_in_graph[i]) continue;
      const at::Tensor& grad = state.parameters[i].grad();
      GRAPHED_CHECK(grad.defined() && grad.data_ptr() == state.parameter_grad_addresses[i], CaptureError, "unit ",
                    state.label(), ": the grad of parameter '", state.parameter_names[i], "' was ",
                    grad.defined() ? "replaced" : "set to none",
                    " since the capture, but its graph accumulates into "
                    "the old one; fix: zero grads in place (zero_grad without set_to_none), or capture again");
    }
    launch(state.backward_graph, state.backward_draws_random);
    state.pending_backwards = std::max<int64_t>(0, state.pending_backwards - 1);
    variable_list result;
    result.reserve(state.static_grad_inputs.size() + 1);
    result.emplace_back();  // the state holder is not differentiable
    const std::size_t arguments = state.static_inputs.size();
    const std::size_t surface = arguments + (state.parameters_in_surface ? state.parameters.size() : 0);
    for (std::size_t i = 0; i < surface; ++i) {
      const at::Tensor& grad = state.static_grad_inputs[i];
      const bool parameter = i >= arguments;
      if (!grad.defined() || (parameter && state.accumulate_in_graph[i - arguments])) {
        result.emplace_back();
      } else if (parameter && state.clone_parameter_grads) {
        result.push_back(grad.clone());
      } else {
        result.push_back(grad.detach());
      }
    }
    return result;
  }
};

/// The checks of a call that need no autograd: captured, arguments as captured, bound buffers passed
/// as themselves, parameters where they were.
void check_call(const GraphedUnitState& state, const std::vector<at::Tensor>& arguments) {
  require_captured(state, "before this call");
  check_arguments(state.label(), state.signatures, arguments);
  for (std::size_t i = 0; i < state.input_bindings.size(); ++i) {
    if (state.input_bindings[i] != InputBinding::kMustBeBuffer) continue;
    if (arguments[i].data_ptr() == state.static_inputs[i].data_ptr()) continue;
    throw CaptureError("unit " + state.label() + ": argument '" + state.signatures[i].name + "' was recorded as " +
                           state.input_producers[i] +
                           ", and the graphs share that buffer, but this call passes "
                           "another tensor",
                       "call the graphed units in the recorded order and pass each unit's output on unchanged (no "
                       "operation in between), or delete the graphs and record again");
  }
  for (std::size_t i = 0; i < state.parameters.size(); ++i) {
    if (address_of(state.parameters[i]) == state.parameter_addresses[i]) continue;
    throw CaptureError("unit " + state.label() + ": parameter '" + state.parameter_names[i] +
                           "' moved to another address since the capture (the model was moved, reloaded into "
                           "new tensors or its parameters were replaced)",
                       "copy new values into the existing parameters in place, or delete the graphs and capture "
                       "again");
  }
}

}  // namespace

std::string GraphedUnitState::label() const { return unit.name + " (" + slot + ")"; }

std::set<const void*> shared_parameters(const std::vector<GraphableUnit>& units) {
  std::map<const void*, int> readers;
  for (const GraphableUnit& unit : units) {
    std::set<const void*> mine;
    for (const at::Tensor& p : unit.parameters) mine.insert(p.unsafeGetTensorImpl());
    for (const void* p : mine) ++readers[p];
  }
  std::set<const void*> shared;
  for (const auto& [parameter, count] : readers) {
    if (count > 1) shared.insert(parameter);
  }
  return shared;
}

std::vector<at::Tensor> surface_of(const GraphedUnitState& state) {
  std::vector<at::Tensor> surface = state.static_inputs;
  surface.insert(surface.end(), state.parameters.begin(), state.parameters.end());
  return surface;
}

WarmupPass warm_up_forward(GraphedUnitState& state, std::vector<at::Tensor> inputs, bool first_pass,
                           const at::Device& device) {
  WarmupPass pass;
  pass.inputs = std::move(inputs);
  const uint64_t offset = cuda_random_offset(device);
  pass.outputs = state.unit.forward(pass.inputs);
  if (first_pass) state.forward_draws_random = cuda_random_offset(device) != offset;
  return pass;
}

void warm_up_backward(GraphedUnitState& state, WarmupPass pass, bool first_pass, bool allow_unused_input,
                      const at::Device& device) {
  std::vector<at::Tensor> surface = pass.inputs;
  surface.insert(surface.end(), state.parameters.begin(), state.parameters.end());
  const GradientProblem problem = gradient_problem(surface, state.needs_grad, pass.outputs);
  if (problem.outputs.empty() || problem.inputs.empty()) return;
  std::vector<at::Tensor> seeds;
  for (const at::Tensor& o : problem.outputs) seeds.push_back(at::ones_like(o));
  const uint64_t offset = cuda_random_offset(device);
  const auto grads = torch::autograd::grad(problem.outputs, problem.inputs, seeds, /*retain_graph=*/false,
                                           /*create_graph=*/false, /*allow_unused=*/true);
  if (!first_pass) return;
  state.backward_draws_random = cuda_random_offset(device) != offset;
  // Unused arguments: an error unless allowed; unused parameters are dropped (TransformerEngine).
  const std::size_t arguments = pass.inputs.size();
  std::vector<std::size_t> unused_parameters;
  for (std::size_t k = 0; k < grads.size(); ++k) {
    if (grads[k].defined()) continue;
    const std::size_t i = problem.input_index[k];
    if (i >= arguments) {
      unused_parameters.push_back(i - arguments);
      continue;
    }
    GRAPHED_CHECK(allow_unused_input, CaptureError, "unit ", state.label(), ": argument '", state.signatures[i].name,
                  "' requires grad but no output depends on it; fix: pass it without requires_grad, or set "
                  "allow_unused_input (its grad is then undefined)");
    state.needs_grad[i] = false;
  }
  drop_parameters(state, unused_parameters);
}

void capture_forward(GraphedUnitState& state, const GraphPool& pool, CaptureMode mode) {
  state.static_outputs = state.forward_graph.capture([&] { return state.unit.forward(state.static_inputs); }, pool,
                                                     mode, "the forward of unit " + state.label());
  state.output_requires_grad.clear();
  for (const at::Tensor& o : state.static_outputs) {
    GRAPHED_CHECK(o.defined(), CaptureError, "unit ", state.label(),
                  " returned an undefined tensor; fix: return defined tensors only");
    state.output_requires_grad.push_back(o.requires_grad());
  }
}

void capture_backward(GraphedUnitState& state, const std::vector<at::Tensor>& seeds, const GraphPool& pool,
                      CaptureMode mode, bool retain_graph) {
  const GradientProblem problem = gradient_problem(surface_of(state), state.needs_grad, state.static_outputs);
  state.static_grad_outputs.assign(state.static_outputs.size(), at::Tensor());
  state.static_grad_inputs.assign(state.needs_grad.size(), at::Tensor());
  state.has_backward = !problem.outputs.empty() && !problem.inputs.empty();
  if (!state.has_backward) return;
  std::vector<at::Tensor> problem_seeds;
  for (const std::size_t output : problem.output_index) {
    const at::Tensor& seed = seeds.at(output);
    GRAPHED_INTERNAL_ASSERT(seed.defined(), "unit ", state.label(), ": no grad buffer for output ", output);
    state.static_grad_outputs[output] = seed;
    problem_seeds.push_back(seed);
  }
  const std::size_t arguments = state.static_inputs.size();
  const auto grads = state.backward_graph.capture(
      [&] {
        std::vector<at::Tensor> result =
            torch::autograd::grad(problem.outputs, problem.inputs, problem_seeds, retain_graph, /*create_graph=*/false,
                                  /*allow_unused=*/true);
        // As autograd's AccumulateGrad does (grad += new, in place), but captured: no eager add per call.
        for (std::size_t k = 0; k < result.size(); ++k) {
          const std::size_t i = problem.input_index[k];
          if (i < arguments || !state.accumulate_in_graph[i - arguments] || !result[k].defined()) continue;
          state.parameters[i - arguments].mutable_grad().add_(result[k]);
          result[k] = at::Tensor();
        }
        return result;
      },
      pool, mode, "the backward of unit " + state.label());
  for (std::size_t k = 0; k < grads.size(); ++k) state.static_grad_inputs[problem.input_index[k]] = grads[k];
}

void release_autograd_graph(GraphedUnitState& state, bool non_owning) {
  for (at::Tensor& o : state.static_outputs) o = non_owning ? non_owning_alias(o) : o.detach();
}

void finish_capture(GraphedUnitState& state) {
  // From the signatures: a released static input (a non-owning alias) no longer says it needs grad.
  const bool argument_needs_grad = std::any_of(state.signatures.begin(), state.signatures.end(),
                                               [](const ArgumentSignature& s) { return s.requires_grad; });
  bool grad_to_autograd = false;
  for (std::size_t i = 0; i < state.parameters.size(); ++i) {
    grad_to_autograd = grad_to_autograd || (!state.accumulate_in_graph[i] && state.parameters[i].requires_grad());
  }
  state.parameters_in_surface = grad_to_autograd || !argument_needs_grad;
  state.parameter_addresses.clear();
  state.parameter_grad_addresses.clear();
  for (std::size_t i = 0; i < state.parameters.size(); ++i) {
    const at::Tensor& p = state.parameters[i];
    state.parameter_addresses.push_back(address_of(p));
    const bool accumulated = state.accumulate_in_graph[i] && p.grad().defined();
    state.parameter_grad_addresses.push_back(accumulated ? p.grad().data_ptr() : nullptr);
  }
  state.captured = true;
}

std::vector<at::Tensor> replay(const std::shared_ptr<GraphedUnitState>& state,
                               const std::vector<at::Tensor>& arguments) {
  check_call(*state, arguments);
  std::vector<at::Tensor> surface = arguments;
  if (state->parameters_in_surface) surface.insert(surface.end(), state->parameters.begin(), state->parameters.end());
  const bool records_backward =
      state->has_backward && at::GradMode::is_enabled() &&
      std::any_of(surface.begin(), surface.end(), [](const at::Tensor& t) { return t.requires_grad(); });
  auto outputs = GraphReplay::apply(c10::make_intrusive<StateHolder>(state), at::TensorList(surface));
  if (records_backward) ++state->pending_backwards;
  return outputs;
}

at::Tensor non_owning_alias(const at::Tensor& tensor) {
  return at::from_blob(tensor.data_ptr(), tensor.sizes(), tensor.strides(), tensor.options());
}

void reset(GraphedUnitState& state) {
  state.forward_graph.reset();
  state.backward_graph.reset();
  state.static_outputs.clear();
  state.static_grad_outputs.clear();
  state.static_grad_inputs.clear();
  state.static_inputs.clear();
  state.pending_backwards = 0;
  state.captured = false;
}

}  // namespace graphed::capture::detail
