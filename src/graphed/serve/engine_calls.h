// serve/engine_calls.h — what the engine loop asks of the serving engine, chosen once by whoever builds the
// loop: the engine itself (LocalEngineCalls), or the engine of a tensor-parallel group's first rank, whose steps
// the other ranks follow and which must tell them when to stop (serve/step_broadcast.h).
#pragma once

#include <cstdint>
#include <vector>

#include "graphed/infer/serving_engine.h"

namespace graphed::serve {

class EngineCalls {
 public:
  virtual ~EngineCalls() = default;
  virtual int64_t add_request(std::vector<int64_t> prompt, infer::RequestOptions options) = 0;
  virtual void cancel(int64_t id) = 0;
  virtual infer::StepResult step() = 0;
  /// After the loop's last step (a group's first rank lets the other ranks go).
  virtual void finish() {}
  /// Instead of finish(), when this rank failed (a group's first rank tells the other ranks not to wait for it).
  virtual void abort() {}
};

class LocalEngineCalls final : public EngineCalls {
 public:
  explicit LocalEngineCalls(infer::ServingEngine& engine) : engine_(engine) {}
  int64_t add_request(std::vector<int64_t> prompt, infer::RequestOptions options) override {
    return engine_.add_request(std::move(prompt), std::move(options));
  }
  void cancel(int64_t id) override { engine_.cancel(id); }
  infer::StepResult step() override { return engine_.step(); }

 private:
  infer::ServingEngine& engine_;
};

}  // namespace graphed::serve
