// capture/local_record.cpp — see capture/local_record.h.
#include "graphed/capture/local_record.h"

#include <utility>

#include "graphed/util/error.h"

namespace graphed::capture {
namespace {

/// Who produced a tensor: (runner, output index).
using Producers = std::map<int64_t, std::pair<int64_t, int64_t>>;
/// Every graph argument reading a tensor: (runner, argument index).
using Consumers = std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>>;

Consumers consumers_of(const LocalRecord& record) {
  Consumers consumers;
  for (const RecordEntry& entry : record.entries()) {
    if (!entry.forward) continue;
    const RecordedForward& call = record.forward_of(entry.runner);
    for (std::size_t i = 0; i < call.inputs.size(); ++i) {
      consumers[call.inputs[i]].emplace_back(call.runner, static_cast<int64_t>(i));
    }
  }
  return consumers;
}

/// Forward inputs: outputs of earlier graphs first, then tensors several graphs read, else fresh.
void plan_inputs(const LocalRecord& record, const Consumers& consumers, LocalBufferPlan& plan) {
  Producers producers;
  std::map<int64_t, int64_t> shared_of_tensor;
  for (const RecordEntry& entry : record.entries()) {
    if (!entry.forward) continue;
    const RecordedForward& call = record.forward_of(entry.runner);
    std::vector<PlannedInput>& inputs = plan.inputs[call.runner];
    for (const int64_t tensor : call.inputs) {
      PlannedInput input;
      if (const auto produced = producers.find(tensor); produced != producers.end()) {
        input.source = InputSource::kOutput;
        input.producer = produced->second.first;
        input.producer_output = produced->second.second;
      } else if (consumers.at(tensor).size() > 1) {
        input.source = InputSource::kShared;
        auto [found, inserted] =
            shared_of_tensor.emplace(tensor, static_cast<int64_t>(plan.shared_buffer_users.size()));
        if (inserted) plan.shared_buffer_users.push_back(0);
        input.shared_buffer = found->second;
        ++plan.shared_buffer_users[static_cast<std::size_t>(found->second)];
      }
      inputs.push_back(input);
    }
    for (std::size_t j = 0; j < call.outputs.size(); ++j) {
      producers.emplace(call.outputs[j], std::make_pair(call.runner, static_cast<int64_t>(j)));
    }
  }
}

/// Backward grad outputs: an output read by exactly one graph argument that needs grad, whose
/// backward was recorded before this one, takes that graph's input-grad buffer.
void plan_grad_outputs(const LocalRecord& record, const Consumers& consumers, LocalBufferPlan& plan) {
  std::map<int64_t, bool> backward_done;
  for (const RecordEntry& entry : record.entries()) {
    if (entry.forward) continue;
    const RecordedForward& call = record.forward_of(entry.runner);
    std::vector<PlannedGradOutput>& grads = plan.grad_outputs[entry.runner];
    for (std::size_t j = 0; j < call.outputs.size(); ++j) {
      PlannedGradOutput grad;
      const auto readers = consumers.find(call.outputs[j]);
      if (call.output_requires_grad[j] && readers != consumers.end() && readers->second.size() == 1) {
        const auto [consumer, argument] = readers->second.front();
        const bool needs_grad = record.forward_of(consumer).input_requires_grad[static_cast<std::size_t>(argument)];
        if (needs_grad && backward_done[consumer]) {
          grad.consumer = consumer;
          grad.consumer_input = argument;
        }
      }
      grads.push_back(grad);
    }
    backward_done[entry.runner] = true;
  }
}

}  // namespace

void LocalRecord::add_forward(RecordedForward call) {
  GRAPHED_INTERNAL_ASSERT(forwards_.count(call.runner) == 0, "runner ", call.runner, " recorded twice");
  GRAPHED_INTERNAL_ASSERT(
      call.inputs.size() == call.input_requires_grad.size() && call.outputs.size() == call.output_requires_grad.size(),
      "runner ", call.runner, ": flags do not match the tensors");
  entries_.push_back({true, call.runner});
  forwards_.emplace(call.runner, std::move(call));
}

void LocalRecord::add_backward(int64_t runner) {
  GRAPHED_INTERNAL_ASSERT(forwards_.count(runner) == 1, "backward of runner ", runner, " before its forward");
  GRAPHED_INTERNAL_ASSERT(backwards_.insert(runner).second, "backward of runner ", runner, " recorded twice");
  entries_.push_back({false, runner});
}

const RecordedForward& LocalRecord::forward_of(int64_t runner) const {
  const auto found = forwards_.find(runner);
  GRAPHED_INTERNAL_ASSERT(found != forwards_.end(), "runner ", runner, " was not recorded");
  return found->second;
}

bool LocalRecord::has_backward(int64_t runner) const { return backwards_.count(runner) > 0; }

void LocalRecord::clear() {
  entries_.clear();
  forwards_.clear();
  backwards_.clear();
}

LocalBufferPlan plan_local_buffers(const LocalRecord& record) {
  LocalBufferPlan plan;
  const Consumers consumers = consumers_of(record);
  plan_inputs(record, consumers, plan);
  plan_grad_outputs(record, consumers, plan);
  return plan;
}

}  // namespace graphed::capture
