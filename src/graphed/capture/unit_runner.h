// capture/unit_runner.h — how a model calls one of its graphable units: through a UnitRunner, which
// is eager (below), a local CudaGraphManager (capture/cuda_graph_manager.h) or ahead-of-time graphed
// callables (capture/graphed_callable.h). The model never knows which. A unit is any function over
// tensors plus the parameters it reads; nothing here knows about transformers.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace graphed::capture {

/// A callable region that can be graphed: a function from input tensors to output tensors.
/// Parameters are listed so that a graphing runner can route their gradients.
struct GraphableUnit {
  using Function = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;
  std::string name;                          ///< e.g. "layers.3.attention"
  Function forward;                          ///< must not be empty
  std::vector<at::Tensor> parameters;        ///< the parameters forward reads
  std::vector<std::string> input_names;      ///< optional, for error messages ("hidden")
  std::vector<std::string> parameter_names;  ///< optional, parallel to parameters
};

/// Runs a unit. Implementations: EagerUnitRunner (below), GraphedCallable and MicrobatchRunner
/// (capture/graphed_callable.h), CudaGraphManager (capture/cuda_graph_manager.h).
class UnitRunner {
 public:
  virtual ~UnitRunner() = default;
  /// Runs the unit on these inputs and returns its outputs. microbatch: which microbatch of the
  /// iteration this call belongs to (0-based); runners with one graph set per microbatch slot pick
  /// theirs by it, the others ignore it.
  virtual std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, int64_t microbatch) = 0;
  /// The unit this runner runs.
  virtual const GraphableUnit& unit() const = 0;
};

/// Calls the unit's function directly.
class EagerUnitRunner final : public UnitRunner {
 public:
  explicit EagerUnitRunner(GraphableUnit unit) : unit_(std::move(unit)) {}
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, int64_t /*microbatch*/) override {
    return unit_.forward(inputs);
  }
  const GraphableUnit& unit() const override { return unit_; }

 private:
  GraphableUnit unit_;
};

}  // namespace graphed::capture
