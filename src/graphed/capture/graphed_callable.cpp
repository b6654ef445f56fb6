// capture/graphed_callable.cpp — see capture/graphed_callable.h. The replay itself is
// detail::replay (capture/detail/unit_graphs.h), shared with the local implementation's runners.
#include "graphed/capture/graphed_callable.h"

#include <ATen/core/grad_mode.h>

#include "graphed/capture/capture_state.h"
#include "graphed/capture/detail/unit_graphs.h"
#include "graphed/util/error.h"
#include "graphed/util/text.h"

namespace graphed::capture {

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

GraphedCallable::GraphedCallable(std::shared_ptr<detail::GraphedUnitState> state) : state_(std::move(state)) {}
GraphedCallable::~GraphedCallable() = default;

std::vector<at::Tensor> GraphedCallable::run(const std::vector<at::Tensor>& inputs, int64_t /*microbatch*/) {
  GRAPHED_CHECK(state_->keyword_names.empty(), CaptureError, "unit ", state_->label(),
                " was captured with keyword arguments but called with positional ones only; fix: call it "
                "through GraphedCallable::call with the same keyword arguments");
  return detail::replay(state_, inputs);
}

std::vector<at::Tensor> GraphedCallable::call(const UnitArguments& arguments) {
  std::vector<std::string> names;
  for (const auto& entry : arguments.keyword) names.push_back(entry.first);
  if (names != state_->keyword_names) {
    throw CaptureError("unit " + state_->label() + " was called with keyword arguments {" + join(names, ", ") +
                           "} but was captured with {" + join(state_->keyword_names, ", ") + "}",
                       "pass exactly the keyword arguments of the capture");
  }
  return detail::replay(state_, arguments.flatten());
}

const GraphableUnit& GraphedCallable::unit() const { return state_->unit; }
void GraphedCallable::reset() { detail::reset(*state_); }
std::string GraphedCallable::label() const { return state_->label(); }
int64_t GraphedCallable::microbatch() const { return state_->microbatch; }
bool GraphedCallable::is_captured() const { return state_->captured; }
bool GraphedCallable::has_backward_graph() const { return state_->has_backward; }
int64_t GraphedCallable::graph_count() const { return state_->graph_count(); }
int64_t GraphedCallable::parameter_count() const { return static_cast<int64_t>(state_->parameters.size()); }
const at::Tensor& GraphedCallable::static_input(std::size_t index) const { return state_->static_inputs.at(index); }
const at::Tensor& GraphedCallable::static_output(std::size_t index) const { return state_->static_outputs.at(index); }
const at::Tensor& GraphedCallable::static_grad_output(std::size_t index) const {
  return state_->static_grad_outputs.at(index);
}
const at::Tensor& GraphedCallable::static_grad_input(std::size_t index) const {
  return state_->static_grad_inputs.at(index);
}

MicrobatchRunner::MicrobatchRunner(GraphableUnit unit, std::vector<std::shared_ptr<GraphedCallable>> callables)
    : unit_(std::move(unit)), callables_(std::move(callables)) {
  GRAPHED_INTERNAL_ASSERT(!callables_.empty(), "a MicrobatchRunner needs callables");
}

std::vector<at::Tensor> MicrobatchRunner::run(const std::vector<at::Tensor>& inputs, int64_t microbatch) {
  if (!at::GradMode::is_enabled() || is_eager_only()) return unit_.forward(inputs);
  const auto slots = static_cast<int64_t>(callables_.size());
  return callables_[static_cast<std::size_t>(((microbatch % slots) + slots) % slots)]->run(inputs, microbatch);
}

}  // namespace graphed::capture
