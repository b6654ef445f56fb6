// infer/request_controls.h — the serving engine's side of each request's logit controls and token masks
// (infer/logit_controls.h does the step's side): a request with controls holds a row of the control tables while it
// runs, written when it first runs (bias, the min-tokens ban, its prompt's tokens, what it drew before a
// preemption), its ban lifted by the step that draws token min_tokens; a masked step's masks are asked of the
// requests' constraints on a few worker threads and copied to the device.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/infer/request.h"
#include "graphed/infer/scheduler.h"
#include "graphed/infer/step_inputs.h"
#include "graphed/util/worker_pool.h"

namespace graphed::infer {

class RequestControls {
 public:
  /// Control slots 1..max_requests (StepInputs' tables have them).
  RequestControls(const at::Device& device, int64_t max_requests);

  /// Before a step with controls: the tables made, a slot for each of its requests with controls that has none, and
  /// the min-tokens bans its draws lift (queued on the current stream, before the step).
  void prepare(const Schedule& schedule, StepInputs& inputs);
  /// A request that ends or is preempted gives its slot back (none held: nothing).
  void release(Request& request);
  /// Writes each row's mask, allowed() of its constraint (all ones where null), into the inputs' pinned masks and
  /// queues their copy to the device. `constraints`: one per row of the step's padded shape.
  void write_masks(const std::vector<TokenConstraint*>& constraints, StepInputs& inputs);

 private:
  void open(Request& request, const LogitTables& tables);
  /// Sets `row`[token] = value for each entry, through pinned memory without blocking.
  void put(at::Tensor row, const std::map<int64_t, float>& entries) const;

  at::Device device_;
  std::vector<int64_t> free_slots_;
  std::unique_ptr<WorkerPool> workers_;  // made with the first masked step
};

}  // namespace graphed::infer
