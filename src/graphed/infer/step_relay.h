// infer/step_relay.h — StepRelay: what a scheduling engine tells the ranks that follow it about each step it
// launches, so that they launch the very same step without scheduling (ServingEngine::follow). Chosen once, when
// the engine is built: one process (or ranks that each schedule alike) takes the relay that tells nobody; a
// tensor-parallel group's first rank, one that broadcasts (serve/step_broadcast.h). The engine calls it in a fixed
// order, which the followers repeat, because a step's graph capture and its run both hold the model's collectives.
#pragma once

#include <ATen/ATen.h>

#include "graphed/infer/step_order.h"

namespace graphed::infer {

class StepRelay {
 public:
  virtual ~StepRelay() = default;
  /// What the step is: before its graphs are captured (when it needs them) and its inputs loaded.
  virtual void announce(const StepOrder& order) = 0;
  /// The step's packed inputs (StepInputs::packed_inputs), just loaded, on the step's stream, before the step runs.
  virtual void share_inputs(at::Tensor& inputs) = 0;

  /// The relay of an engine that no rank follows: it tells nobody (it holds nothing, so one serves every engine).
  static StepRelay& none();
};

/// StepRelay::none()'s relay.
class NoStepRelay final : public StepRelay {
 public:
  void announce(const StepOrder&) override {}
  void share_inputs(at::Tensor&) override {}
};

inline StepRelay& StepRelay::none() {
  static NoStepRelay relay;
  return relay;
}

}  // namespace graphed::infer
