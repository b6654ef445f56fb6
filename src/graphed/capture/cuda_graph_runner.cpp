// capture/cuda_graph_runner.cpp — see capture/cuda_graph_runner.h. The per-unit capture and replay
// steps are shared with make_graphed_callables (capture/detail/unit_graphs.h).
#include "graphed/capture/cuda_graph_runner.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <functional>

#include "graphed/capture/capture_state.h"
#include "graphed/capture/detail/unit_graphs.h"
#include "graphed/capture/graph_registry.h"
#include "graphed/capture/random_stream.h"
#include "graphed/runtime/device.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"

namespace graphed::capture {

/// What a recording's no-op autograd node reports to when the backward reaches it.
struct RecordTracker {
  int64_t runner = 0;
  std::weak_ptr<detail::GraphedUnitState> state;
  std::weak_ptr<std::function<void(int64_t)>> record_backward;  ///< the registry's sink
  bool backward_recorded = false;

  void backward_ran() {
    if (const auto alive = state.lock()) alive->pending_backwards = std::max<int64_t>(0, alive->pending_backwards - 1);
    if (backward_recorded) return;
    backward_recorded = true;
    if (const auto sink = record_backward.lock()) (*sink)(runner);
  }
};

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct TrackerHolder : torch::CustomClassHolder {
  explicit TrackerHolder(std::shared_ptr<RecordTracker> t) : tracker(std::move(t)) {}
  std::shared_ptr<RecordTracker> tracker;
};

/// Identity in forward; in backward it tells the tracker that the unit's backward has begun
/// (Megatron's no-op node on the first output, §2.5).
struct RecordBackward : torch::autograd::Function<RecordBackward> {
  static at::Tensor forward(AutogradContext* context, const c10::intrusive_ptr<TrackerHolder>& holder,
                            const at::Tensor& output) {
    context->saved_data["tracker"] = c10::IValue::make_capsule(holder);
    return output;
  }
  static variable_list backward(AutogradContext* context, variable_list grads) {
    c10::static_intrusive_pointer_cast<TrackerHolder>(context->saved_data["tracker"].toCapsule())
        ->tracker->backward_ran();
    return {at::Tensor(), grads[0]};
  }
};

at::Tensor fresh_copy(const at::Tensor& tensor, bool requires_grad) {
  return at::empty_like(tensor).copy_(tensor).requires_grad_(requires_grad);
}

}  // namespace

CudaGraphRunner::CudaGraphRunner(GraphableUnit unit, Kind kind, int64_t id, const std::vector<at::Tensor>& arguments)
    : state_(std::make_shared<detail::GraphedUnitState>()), kind_(kind), id_(id) {
  state_->unit = std::move(unit);
  state_->slot = "runner " + std::to_string(id);
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const std::string name =
        i < state_->unit.input_names.size() ? state_->unit.input_names[i] : "argument " + std::to_string(i);
    state_->signatures.push_back(signature_of(label(), name, arguments[i]));
  }
  for (std::size_t p = 0; p < state_->unit.parameters.size(); ++p) {
    state_->parameters.push_back(state_->unit.parameters[p]);
    state_->parameter_names.push_back(p < state_->unit.parameter_names.size() ? state_->unit.parameter_names[p]
                                                                              : "parameter " + std::to_string(p));
  }
  state_->accumulate_in_graph.assign(state_->parameters.size(), false);
}

CudaGraphRunner::~CudaGraphRunner() { detail::reset(*state_); }

const GraphableUnit& CudaGraphRunner::unit() const { return state_->unit; }

std::string CudaGraphRunner::label() const { return state_->label(); }

bool CudaGraphRunner::is_ready_for_forward() const { return state_->pending_backwards == 0; }

bool CudaGraphRunner::is_captured() const { return state_->captured; }

int64_t CudaGraphRunner::graph_count() const { return state_->graph_count(); }

std::vector<std::string> CudaGraphRunner::mismatches(const std::vector<at::Tensor>& arguments) const {
  const auto& expected = state_->signatures;
  if (arguments.size() != expected.size()) {
    return {std::to_string(arguments.size()) + " arguments, recorded with " + std::to_string(expected.size())};
  }
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const ArgumentSignature& want = expected[i];
    const at::Tensor& got = arguments[i];
    if (!got.defined()) {
      lines.push_back(argument_label(want, i) + ": got an undefined tensor; recorded " + describe(want));
    } else if (!matches(want, got)) {
      lines.push_back(argument_label(want, i) + ": got " + describe(signature_of(label(), want.name, got)) +
                      "; recorded " + describe(want));
    }
  }
  return lines;
}

std::vector<at::Tensor> CudaGraphRunner::record(const std::vector<at::Tensor>& arguments, GraphRegistry& registry) {
  GRAPHED_INTERNAL_ASSERT(kind_ == Kind::kTraining, "recording a forward-only runner");
  if (!tracker_) {
    tracker_ = std::make_shared<RecordTracker>();
    tracker_->runner = id_;
    tracker_->state = state_;
    tracker_->record_backward = registry.backward_sink();
  }
  std::vector<at::Tensor> outputs = state_->unit.forward(arguments);
  const auto first = std::find_if(outputs.begin(), outputs.end(),
                                  [](const at::Tensor& t) { return t.defined() && t.requires_grad(); });
  if (first != outputs.end()) {
    *first = RecordBackward::apply(c10::make_intrusive<TrackerHolder>(tracker_), *first);
    ++state_->pending_backwards;
  }
  if (!forward_recorded_) {
    forward_recorded_ = true;
    autocast_ = compat::cuda_autocast_enabled();
    for (const at::Tensor& argument : arguments) recorded_arguments_.push_back(argument.detach());
    registry.record_forward(*this, arguments, outputs);
  }
  return outputs;
}

void CudaGraphRunner::warm_up(const LocalGraphOptions& options, const at::Device& device) {
  WarmupScope warming(WarmupKind::kGradientProbe);
  const bool with_backward = kind_ == Kind::kTraining;
  for (int64_t pass = 0; pass < options.warmup_passes; ++pass) {
    std::vector<at::Tensor> copies;
    for (std::size_t i = 0; i < recorded_arguments_.size(); ++i) {
      copies.push_back(fresh_copy(recorded_arguments_[i], with_backward && state_->signatures[i].requires_grad));
    }
    detail::WarmupPass warm = detail::warm_up_forward(*state_, std::move(copies), pass == 0, device);
    if (with_backward)
      detail::warm_up_backward(*state_, std::move(warm), pass == 0, /*allow_unused_input=*/true, device);
  }
  runtime::synchronize(device);
}

void CudaGraphRunner::capture_forward(StaticInputs inputs, std::vector<bool> accumulate_in_graph, const GraphPool& pool,
                                      const LocalGraphOptions& options, const at::Device& device) {
  GRAPHED_INTERNAL_ASSERT(forward_recorded_ && inputs.buffers.size() == state_->signatures.size() &&
                              accumulate_in_graph.size() == state_->parameters.size(),
                          "runner ", label(), " captured without a matching record");
  detail::GraphedUnitState& state = *state_;
  state.static_inputs = std::move(inputs.buffers);
  state.input_bindings.clear();
  for (const bool from_output : inputs.from_output) {
    state.input_bindings.push_back(from_output ? detail::InputBinding::kMustBeBuffer
                                               : detail::InputBinding::kCopyWhenDifferent);
  }
  state.input_producers = std::move(inputs.producers);
  state.accumulate_in_graph = std::move(accumulate_in_graph);
  // Grads of shared parameters go to autograd. When their param.grad exists, AccumulateGrad adds into it
  // in place and never adopts the graph's buffer (PyTorch #181723), so no clone is needed.
  state.clone_parameter_grads = false;
  for (std::size_t p = 0; p < state.parameters.size(); ++p) {
    const at::Tensor& parameter = state.parameters[p];
    if (!state.accumulate_in_graph[p] && parameter.requires_grad() && !parameter.grad().defined()) {
      state.clone_parameter_grads = true;
    }
  }
  for (std::size_t p = 0; p < state.parameters.size(); ++p) {
    GRAPHED_CHECK(
        !state.accumulate_in_graph[p] || !state.parameters[p].requires_grad() || state.parameters[p].grad().defined(),
        CaptureError, "unit ", label(), ": parameter '", state.parameter_names[p],
        "' has no grad tensor, "
        "but its graph accumulates into it; fix: allocate every param.grad (zeros) before the graphs are "
        "created (an optimizer that keeps its grads allocated does)");
  }
  state.needs_grad.clear();
  for (const at::Tensor& t : detail::surface_of(state)) state.needs_grad.push_back(t.requires_grad());
  compat::AutocastScope autocast(autocast_);
  warm_up(options, device);
  detail::capture_forward(state, pool, options.mode);
}

void CudaGraphRunner::capture_backward(const std::vector<at::Tensor>& seeds, const GraphPool& pool,
                                       const LocalGraphOptions& options) {
  compat::AutocastScope autocast(autocast_);
  detail::capture_backward(*state_, seeds, pool, options.mode, options.retain_backward_graph);
}

void CudaGraphRunner::skip_backward() {
  detail::GraphedUnitState& state = *state_;
  for (std::size_t i = 0; i < state.static_outputs.size(); ++i) {
    GRAPHED_CHECK(!state.output_requires_grad[i], CaptureError, "unit ", label(), ": output ", i,
                  " needs grad, but "
                  "no backward pass reached this unit's outputs in the recorded iteration; fix: make the unit's "
                  "first output that needs grad part of the loss, or return the others without grad");
  }
  state.static_grad_outputs.assign(state.static_outputs.size(), at::Tensor());
  state.static_grad_inputs.assign(state.needs_grad.size(), at::Tensor());
  state.has_backward = false;
  detail::release_autograd_graph(state, /*non_owning=*/false);
}

void CudaGraphRunner::release_buffers(bool give_back_memory, const std::vector<bool>& seed_is_alias) {
  detail::GraphedUnitState& state = *state_;
  detail::release_autograd_graph(state, give_back_memory);
  if (!give_back_memory) return;
  // Input grads (of arguments and parameters) stay owned: autograd may hold one in a sum with other
  // grads while later graphs replay, and those graphs must not have been given its memory.
  for (std::size_t i = 0; i < state.static_inputs.size(); ++i) {
    if (state.input_bindings[i] == detail::InputBinding::kMustBeBuffer) {
      state.static_inputs[i] = detail::non_owning_alias(state.static_inputs[i]);
    }
  }
  for (std::size_t i = 0; i < state.static_grad_outputs.size() && i < seed_is_alias.size(); ++i) {
    if (seed_is_alias[i]) state.static_grad_outputs[i] = detail::non_owning_alias(state.static_grad_outputs[i]);
  }
}

void CudaGraphRunner::finish_capture() {
  detail::finish_capture(*state_);
  recorded_arguments_.clear();
}

const at::Tensor& CudaGraphRunner::static_input(std::size_t index) const { return state_->static_inputs.at(index); }
const at::Tensor& CudaGraphRunner::static_output(std::size_t index) const { return state_->static_outputs.at(index); }
const at::Tensor& CudaGraphRunner::static_grad_output(std::size_t index) const {
  return state_->static_grad_outputs.at(index);
}
const at::Tensor& CudaGraphRunner::static_grad_input(std::size_t index) const {
  static const at::Tensor none;
  return index < state_->static_grad_inputs.size() ? state_->static_grad_inputs[index] : none;
}
std::size_t CudaGraphRunner::output_count() const { return state_->static_outputs.size(); }
bool CudaGraphRunner::output_requires_grad(std::size_t index) const { return state_->output_requires_grad.at(index); }

std::vector<at::Tensor> CudaGraphRunner::replay(const std::vector<at::Tensor>& arguments) {
  return detail::replay(state_, arguments);
}

std::vector<at::Tensor> CudaGraphRunner::capture_inline(const std::vector<at::Tensor>& arguments,
                                                        GraphRegistry& registry) {
  GRAPHED_INTERNAL_ASSERT(kind_ == Kind::kForwardOnly, "inline capture of a training runner");
  detail::GraphedUnitState& state = *state_;
  const at::Device device = arguments.empty() ? registry.device() : arguments.front().device();
  OffDefaultStream off_default_stream(device);
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const bool chained = registry.is_forward_only_output(arguments[i]);
    state.static_inputs.push_back(chained ? arguments[i].detach() : fresh_copy(arguments[i], false));
    state.input_bindings.push_back(chained ? detail::InputBinding::kMustBeBuffer
                                           : detail::InputBinding::kCopyWhenDifferent);
    state.input_producers.push_back("the output of an evaluation graph");
    recorded_arguments_.push_back(arguments[i].detach());
  }
  state.needs_grad.assign(state.static_inputs.size() + state.parameters.size(), false);
  autocast_ = compat::cuda_autocast_enabled();
  const RandomStateSnapshot random_states(device);
  warm_up(registry.options(), device);
  detail::capture_forward(state, registry.evaluation_pool(), registry.options().mode);
  random_states.restore();
  state.output_requires_grad.assign(state.static_outputs.size(), false);
  skip_backward();
  finish_capture();
  registry.add_forward_only_outputs(state.static_outputs);
  return replay(arguments);
}

}  // namespace graphed::capture
