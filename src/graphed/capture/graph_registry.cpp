// capture/graph_registry.cpp — see capture/graph_registry.h. create_cudagraphs() follows research
// §2.6: one pass over the record, forwards and backwards as they ran, into one pool, so that the
// pool's allocations during capture follow the order the graphs replay in.
#include "graphed/capture/graph_registry.h"

#include <algorithm>
#include <chrono>

#include "graphed/capture/capture_memory.h"
#include "graphed/capture/cuda_graph_manager.h"
#include "graphed/capture/detail/unit_graphs.h"
#include "graphed/capture/random_stream.h"
#include "graphed/runtime/device.h"
#include "graphed/util/error.h"

namespace graphed::capture {
GraphRegistry::GraphRegistry(const at::Device& device, LocalGraphOptions options, GraphPool pool)
    : device_(device),
      options_(options),
      pool_(pool.is_shared() ? pool : GraphPool::create()),
      evaluation_pool_(options.shared_evaluation_pool ? GraphPool() : GraphPool::create()),
      backward_sink_(
          std::make_shared<std::function<void(int64_t)>>([this](int64_t runner) { record_backward(runner); })) {
  GRAPHED_INTERNAL_ASSERT(options_.warmup_passes >= 1, "warmup passes ", options_.warmup_passes);
}

GraphRegistry::~GraphRegistry() {
  for (CudaGraphManager* manager : managers_) manager->detach_registry();
}

GraphRegistry::EvaluationScope::EvaluationScope(GraphRegistry& registry) : registry_(registry) {
  ++registry_.evaluation_scopes_;
}
GraphRegistry::EvaluationScope::~EvaluationScope() { --registry_.evaluation_scopes_; }

void GraphRegistry::start_recording() {
  GRAPHED_INTERNAL_ASSERT(phase_ == LocalPhase::kEager, "start_recording() outside the eager phase");
  phase_ = LocalPhase::kRecording;
}

void GraphRegistry::add_manager(CudaGraphManager* manager) { managers_.push_back(manager); }

void GraphRegistry::remove_manager(CudaGraphManager* manager) {
  managers_.erase(std::remove(managers_.begin(), managers_.end(), manager), managers_.end());
}

int64_t GraphRegistry::runner_count() const {
  int64_t runners = 0;
  for (const CudaGraphManager* manager : managers_)
    runners += manager->training_runner_count() + manager->forward_only_runner_count();
  return runners;
}

int64_t GraphRegistry::graph_count() const {
  int64_t graphs = 0;
  for (const CudaGraphManager* manager : managers_) graphs += manager->graph_count();
  return graphs;
}

int64_t GraphRegistry::tensor_id(const at::Tensor& tensor) {
  if (!tensor.defined()) return -1 - static_cast<int64_t>(held_.size());  // never equal to another
  std::vector<int64_t> key{reinterpret_cast<int64_t>(tensor.data_ptr()), static_cast<int64_t>(tensor.scalar_type())};
  for (const int64_t size : tensor.sizes()) key.push_back(size);
  key.push_back(-1);
  for (const int64_t stride : tensor.strides()) key.push_back(stride);
  const auto [found, inserted] = tensor_ids_.emplace(key, static_cast<int64_t>(tensor_ids_.size()));
  if (inserted) held_.push_back(tensor.detach());
  return found->second;
}

void GraphRegistry::record_forward(CudaGraphRunner& runner, const std::vector<at::Tensor>& arguments,
                                   const std::vector<at::Tensor>& outputs) {
  GRAPHED_INTERNAL_ASSERT(phase_ == LocalPhase::kRecording, "recording outside the recording phase");
  RecordedForward call;
  call.runner = runner.id();
  for (const at::Tensor& argument : arguments) {
    call.inputs.push_back(tensor_id(argument));
    call.input_requires_grad.push_back(argument.defined() && argument.requires_grad());
  }
  for (const at::Tensor& output : outputs) {
    call.outputs.push_back(tensor_id(output));
    call.output_requires_grad.push_back(output.defined() && output.requires_grad());
  }
  record_.add_forward(std::move(call));
  recorded_[runner.id()] = &runner;
}

void GraphRegistry::record_backward(int64_t runner) {
  // A runner reports its first backward only (RecordTracker).
  if (phase_ != LocalPhase::kRecording || recorded_.count(runner) == 0) return;
  record_.add_backward(runner);
}

bool GraphRegistry::is_forward_only_output(const at::Tensor& tensor) const {
  return tensor.defined() && forward_only_outputs_.count(tensor.data_ptr()) > 0;
}

void GraphRegistry::add_forward_only_outputs(const std::vector<at::Tensor>& outputs) {
  for (const at::Tensor& output : outputs) forward_only_outputs_.insert(output.data_ptr());
}

StaticInputs GraphRegistry::static_inputs_of(const CudaGraphRunner& runner, const LocalBufferPlan& plan,
                                             std::vector<at::Tensor>& shared) {
  const RecordedForward& call = record_.forward_of(runner.id());
  const std::vector<PlannedInput>& planned = plan.inputs.at(runner.id());
  StaticInputs inputs;
  for (std::size_t i = 0; i < planned.size(); ++i) {
    const at::Tensor& recorded = runner.recorded_arguments()[i];
    const bool requires_grad = call.input_requires_grad[i];
    at::Tensor buffer;
    std::string producer;
    switch (planned[i].source) {
      case InputSource::kFresh: buffer = recorded.clone(at::MemoryFormat::Preserve); break;
      case InputSource::kShared: {
        at::Tensor& slot = shared[static_cast<std::size_t>(planned[i].shared_buffer)];
        if (!slot.defined()) slot = recorded.clone(at::MemoryFormat::Preserve);
        buffer = slot.detach();
        break;
      }
      case InputSource::kOutput: {
        const CudaGraphRunner& from = *recorded_.at(planned[i].producer);
        buffer = from.static_output(static_cast<std::size_t>(planned[i].producer_output)).detach();
        producer = "output " + std::to_string(planned[i].producer_output) + " of unit " + from.unit().name;
        break;
      }
    }
    inputs.buffers.push_back(buffer.requires_grad_(requires_grad));
    inputs.from_output.push_back(planned[i].source == InputSource::kOutput);
    inputs.producers.push_back(producer);
  }
  return inputs;
}

void GraphRegistry::capture_backward_of(CudaGraphRunner& runner, const LocalBufferPlan& plan) {
  const std::vector<PlannedGradOutput>& planned = plan.grad_outputs.at(runner.id());
  std::vector<at::Tensor> seeds(runner.output_count());
  std::vector<bool> aliased(runner.output_count(), false);
  for (std::size_t j = 0; j < seeds.size(); ++j) {
    if (!runner.output_requires_grad(j)) continue;
    const at::Tensor& output = runner.static_output(j);
    if (planned[j].consumer >= 0) {
      // The consumer keeps its input grads owned (CudaGraphRunner::release_buffers).
      const at::Tensor& grad =
          recorded_.at(planned[j].consumer)->static_grad_input(static_cast<std::size_t>(planned[j].consumer_input));
      if (detail::can_hold_grad_of(grad, output)) {
        seeds[j] = grad;  // the consumer's backward writes this grad right here: no copy in between
        aliased[j] = true;
        continue;
      }
    }
    seeds[j] = at::empty_like(output);
  }
  runner.capture_backward(seeds, pool_, options_);
  runner.release_buffers(options_.release_buffers, aliased);
}

void GraphRegistry::capture_in_record_order(const LocalBufferPlan& plan) {
  std::vector<GraphableUnit> units;
  for (const CudaGraphManager* manager : managers_) units.push_back(manager->unit());
  const std::set<const void*> shared_parameters = detail::shared_parameters(units);
  std::vector<at::Tensor> shared_inputs(plan.shared_buffer_users.size());
  for (const RecordEntry& entry : record_.entries()) {
    CudaGraphRunner& runner = *recorded_.at(entry.runner);
    if (!entry.forward) {
      capture_backward_of(runner, plan);
      continue;
    }
    std::vector<bool> accumulate;
    for (const at::Tensor& p : runner.unit().parameters) {
      accumulate.push_back(p.requires_grad() && shared_parameters.count(p.unsafeGetTensorImpl()) == 0);
    }
    runner.capture_forward(static_inputs_of(runner, plan, shared_inputs), std::move(accumulate), pool_, options_,
                           device_);
    if (!record_.has_backward(entry.runner)) runner.skip_backward();  // its memory is free for the next graphs
  }
  for (const auto& [id, runner] : recorded_) runner->finish_capture();
}

LocalCreation GraphRegistry::create_cudagraphs() {
  GRAPHED_INTERNAL_ASSERT(phase_ == LocalPhase::kRecording, "create_cudagraphs() outside the recording phase");
  GRAPHED_CHECK(device_.is_cuda(), CaptureError, "the local implementation captures CUDA graphs, but its units run on ",
                device_.str(), "; fix: run the units on a CUDA device, or eagerly (without local graphs) on the CPU");
  const auto start = std::chrono::steady_clock::now();
  OffDefaultStream off_default_stream(device_);
  runtime::synchronize(device_);
  runtime::empty_cache(device_);
  const MemoryMark before(device_);
  const RandomStateSnapshot random_states(device_);  // the model-parallel stream's too
  try {
    capture_in_record_order(plan_local_buffers(record_));
  } catch (...) {
    forget_runners();
    clear_record();
    throw;
  }
  random_states.restore();
  runtime::synchronize(device_);
  LocalCreation creation;
  for (const auto& [id, runner] : recorded_) {
    ++creation.runners;
    creation.graphs += runner->graph_count();
  }
  creation.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  creation.memory = before.taken_since();
  clear_record();
  phase_ = LocalPhase::kCreated;
  return creation;
}

void GraphRegistry::forget_runners() {
  for (CudaGraphManager* manager : managers_) manager->forget_runners();
  recorded_.clear();
  forward_only_outputs_.clear();
}

void GraphRegistry::clear_record() {
  record_.clear();
  held_.clear();
  tensor_ids_.clear();
}

void GraphRegistry::delete_cuda_graphs(GraphPool pool) {
  forget_runners();
  clear_record();
  runtime::synchronize(device_);
  pool_ = pool.is_shared() ? pool : GraphPool::create();
  if (!options_.shared_evaluation_pool) evaluation_pool_ = GraphPool::create();
  runtime::empty_cache(device_);
  if (phase_ != LocalPhase::kEager) phase_ = LocalPhase::kRecording;
}

}  // namespace graphed::capture
