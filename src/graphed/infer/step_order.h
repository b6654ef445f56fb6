// infer/step_order.h — StepOrder: one serving step as a rank that does not schedule needs it to launch the very
// same step (ServingEngine::follow): its graph key, whether a bucket matched it and whether it replays graphs, and
// the plan of its views; or the word to stop following. It travels as a header of int64 values whose length depends
// only on the engines' max requests, so that every step's header is a tensor of one known shape that a collective
// can carry. No requests, no token ids: those travel in the step's packed inputs (infer/step_inputs.h).
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

#include "graphed/infer/paged_step_runner.h"
#include "graphed/infer/step_inputs.h"

namespace graphed::infer {

struct StepOrder {
  enum class Kind {
    kStep,  ///< launch the step below
    kStop,  ///< the scheduling rank stopped serving: stop following
    kAbort  ///< the scheduling rank failed: stop following, and do not wait for it
  };
  Kind kind = Kind::kStep;
  StepKey key;           ///< the padded shape and sampling mode the step runs as
  bool matched = false;  ///< a bucket served it: its views are a graphed shape's (paged only)
  bool graphed = false;  ///< it replays the key's graphs (else the eager runner runs it)
  ViewPlan plan;         ///< at most one segment per request of the key
};

/// The header's length (int64 values) for engines that take `max_requests` requests at once: a few fields and four
/// per prefill segment a step may have (one per request).
int64_t step_order_length(int64_t max_requests);

/// Writes `order` into `header` (CPU, int64, contiguous, step_order_length(max_requests) values; the fields of
/// segments it does not have are zero). An order with more segments than max_requests is a bug.
void encode_step_order(const StepOrder& order, int64_t max_requests, at::Tensor& header);

/// The order `header` holds. A header of another length, or with values no encoded order has, is a bug (an internal
/// error): the ranks of one group were built with other max requests, or the header was torn.
StepOrder decode_step_order(const at::Tensor& header, int64_t max_requests);

}  // namespace graphed::infer
