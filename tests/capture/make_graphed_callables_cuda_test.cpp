// tests/capture/make_graphed_callables_cuda_test.cpp — graphed callables on toy units (no model
// code): forward, input and parameter grads bitwise equal to eager; grads accumulate over microbatches
// without aliasing graph memory (PyTorch #181723); a pipeline order with several microbatches in flight
// and reused buffers; named errors for mismatched and unused arguments; keyword arguments; dropout
// masks differ per replay; reset.
#include "graphed/capture/make_graphed_callables.h"

#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <set>

#include "cuda_test.h"
#include "error_text.h"

#include "capture/expect_equal_tensors.h"
#include "capture/toy_units.h"

namespace graphed::capture {
namespace {

using graphed::testing::error_text;

using graphed::testing::expect_all_equal;
using graphed::testing::linear_unit;

class GraphedCallablesCudaTest : public graphed::testing::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    stream_ = std::make_unique<SideStream>(device_);
    at::manual_seed(0);
    for (int i = 0; i < 2; ++i) {
      weights_.push_back(at::randn({32, 32}, options()).mul_(0.2).requires_grad_());
      biases_.push_back(at::randn({32}, options()).mul_(0.1).requires_grad_());
    }
  }
  at::TensorOptions options() const { return at::TensorOptions().device(device_); }
  std::vector<GraphableUnit> units() const {
    return {linear_unit("a", weights_[0], biases_[0]), linear_unit("b", weights_[1], biases_[1])};
  }
  std::vector<at::Tensor> parameters() const { return {weights_[0], biases_[0], weights_[1], biases_[1]}; }
  void zero_grads() {
    for (const auto& p : parameters()) p.mutable_grad() = at::Tensor();
  }
  std::vector<at::Tensor> grads() const {
    std::vector<at::Tensor> result;
    for (const auto& p : parameters()) result.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
    return result;
  }
  static std::vector<std::shared_ptr<GraphedCallable>> nullptr_callables() { return {}; }
  /// One step through units a then b (graphed when callables are given, else eager) with loss sum(y^2):
  /// returns the output, the input grad and the parameter grads. Grads are zeroed in place or unset.
  std::vector<at::Tensor> two_unit_step(const std::vector<std::shared_ptr<GraphedCallable>>& callables,
                                        const at::Tensor& input, bool zero_in_place) {
    if (zero_in_place) {
      for (const auto& p : parameters()) p.grad().zero_();
    } else {
      zero_grads();
    }
    const at::Tensor x = input.clone().requires_grad_();
    const auto us = units();
    at::Tensor y = callables.empty() ? us[0].forward({x})[0] : callables[0]->run({x}, 0)[0];
    y = callables.empty() ? us[1].forward({y})[0] : callables[1]->run({y}, 0)[0];
    const at::Tensor out = y.clone();
    (y * y).sum().backward();
    std::vector<at::Tensor> result{out, x.grad().clone()};
    for (const auto& g : grads()) result.push_back(g);
    return result;
  }
  at::Device device_{at::kCUDA, 0};
  std::unique_ptr<SideStream> stream_;
  std::vector<at::Tensor> weights_, biases_;
};

TEST_F(GraphedCallablesCudaTest, ChainedUnitsMatchEagerBitwise) {
  SideStream::Use use(*stream_);
  const std::vector<UnitArguments> samples{{{at::randn({8, 32}, options()).requires_grad_()}, {}},
                                           {{at::randn({8, 32}, options()).requires_grad_()}, {}}};
  const auto graphed = make_graphed_callables(units(), samples, {});
  ASSERT_EQ(graphed.size(), 2u);
  EXPECT_TRUE(graphed[0]->has_backward_graph());
  for (int step = 0; step < 3; ++step) {
    const at::Tensor input = at::randn({8, 32}, options());
    expect_all_equal(two_unit_step(graphed, input, false), two_unit_step(nullptr_callables(), input, false),
                     "step " + std::to_string(step) + " output / input grad / param grads");
  }
}

TEST_F(GraphedCallablesCudaTest, GradsAccumulateOverMicrobatchesWithoutAliasingGraphMemory) {
  SideStream::Use use(*stream_);
  const auto graphed = make_graphed_callables(
      units(),
      {{{at::randn({8, 32}, options()).requires_grad_()}, {}}, {{at::randn({8, 32}, options()).requires_grad_()}, {}}},
      {});
  const std::vector<at::Tensor> inputs{at::randn({8, 32}, options()).requires_grad_(),
                                       at::randn({8, 32}, options()).requires_grad_()};
  const auto accumulate = [&](bool use_graphs) {
    zero_grads();  // param.grad undefined: AccumulateGrad may adopt what backward hands it
    const auto us = units();
    for (const at::Tensor& input : inputs) {
      at::Tensor y = use_graphs ? graphed[0]->run({input}, 0)[0] : us[0].forward({input})[0];
      y = use_graphs ? graphed[1]->run({y}, 0)[0] : us[1].forward({y})[0];
      y.sum().backward();
    }
    return grads();
  };
  const auto eager = accumulate(false);
  const auto with_graphs = accumulate(true);
  expect_all_equal(with_graphs, eager, "accumulated grad");
  std::set<const void*> graph_memory;
  for (const auto& callable : graphed) {
    for (std::size_t i = 0; i < 3; ++i) {  // the argument, then weight and bias
      const at::Tensor& g = callable->static_grad_input(i);
      if (g.defined()) graph_memory.insert(g.data_ptr());
    }
  }
  for (const auto& p : parameters()) {
    EXPECT_EQ(graph_memory.count(p.grad().data_ptr()), 0u) << "param.grad aliases a static grad buffer of a graph";
  }
}

TEST_F(GraphedCallablesCudaTest, ChainedUnitsShareBuffersAndMatchEager) {
  SideStream::Use use(*stream_);
  for (const auto& p : parameters()) p.mutable_grad() = at::zeros_like(p);
  GraphedCallablesOptions graph_options;
  graph_options.accumulate_parameter_grads = true;
  graph_options.chained_inputs = {false, true};  // b's input is a's output
  const auto graphed = make_graphed_callables(
      units(),
      {{{at::randn({8, 32}, options()).requires_grad_()}, {}}, {{at::randn({8, 32}, options()).requires_grad_()}, {}}},
      graph_options);
  EXPECT_EQ(graphed[1]->static_input(0).data_ptr(), graphed[0]->static_output(0).data_ptr());
  EXPECT_EQ(graphed[0]->static_grad_output(0).data_ptr(), graphed[1]->static_grad_input(0).data_ptr());
  for (int step = 0; step < 3; ++step) {
    const at::Tensor input = at::randn({8, 32}, options());
    expect_all_equal(two_unit_step(graphed, input, true), two_unit_step(nullptr_callables(), input, true),
                     "chained step " + std::to_string(step));
  }
}

TEST_F(GraphedCallablesCudaTest, InGraphAccumulationEqualsEagerAndGuardsTheGradAddress) {
  SideStream::Use use(*stream_);
  for (const auto& p : parameters()) p.mutable_grad() = at::zeros_like(p);
  GraphedCallablesOptions graph_options;
  graph_options.accumulate_parameter_grads = true;
  const auto graphed = make_graphed_callables(
      units(),
      {{{at::randn({8, 32}, options()).requires_grad_()}, {}}, {{at::randn({8, 32}, options()).requires_grad_()}, {}}},
      graph_options);
  std::vector<const void*> addresses;
  for (const auto& p : parameters()) addresses.push_back(p.grad().data_ptr());
  const std::vector<at::Tensor> inputs{at::randn({8, 32}, options()).requires_grad_(),
                                       at::randn({8, 32}, options()).requires_grad_()};
  const auto accumulate = [&](bool use_graphs) {
    for (const auto& p : parameters()) p.grad().zero_();  // in place, as the trainer's optimizer does
    const auto us = units();
    std::vector<at::Tensor> input_grads;
    for (const at::Tensor& input : inputs) {
      const at::Tensor x = input.detach().requires_grad_();
      at::Tensor y = use_graphs ? graphed[0]->run({x}, 0)[0] : us[0].forward({x})[0];
      y = use_graphs ? graphed[1]->run({y}, 0)[0] : us[1].forward({y})[0];
      (y * y).sum().backward();
      input_grads.push_back(x.grad().clone());
    }
    std::vector<at::Tensor> result = grads();
    result.insert(result.end(), input_grads.begin(), input_grads.end());
    return result;
  };
  const auto eager = accumulate(false);
  expect_all_equal(accumulate(true), eager, "param grads, then input grads");
  for (std::size_t i = 0; i < addresses.size(); ++i) EXPECT_EQ(parameters()[i].grad().data_ptr(), addresses[i]);
  weights_[1].mutable_grad() = at::zeros_like(weights_[1]);  // replaced: the graph would write the old one
  const at::Tensor y = graphed[1]->run({graphed[0]->run({inputs[0]}, 0)[0]}, 0)[0];
  std::string message = "(no error)";
  try {
    y.sum().backward();
  } catch (const std::exception& error) {
    message = error.what();
  }
  EXPECT_NE(message.find("unit b (microbatch 0): the grad of parameter 'b.weight' was replaced since the capture"),
            std::string::npos)
      << message;
}

TEST_F(GraphedCallablesCudaTest, PipelineOrderKeepsMicrobatchesInFlightAndReusesBuffers) {
  SideStream::Use use(*stream_);
  // One chunk of two units, 3 microbatches, 1F1B-like: F0 F1 B0 F2 B1 B2.
  GraphedCallablesOptions graph_options;
  graph_options.order = {1, 1, -1, 1, -1, -1};
  graph_options.reuse_buffers = true;
  std::vector<UnitArguments> samples;
  for (int i = 0; i < 6; ++i) samples.push_back({{at::randn({8, 32}, options()).requires_grad_()}, {}});
  const auto graphed = make_graphed_callables(units(), samples, graph_options);
  ASSERT_EQ(graphed.size(), 6u);  // entry = microbatch x 2 + unit
  std::set<const void*> first_unit_inputs;
  for (int mb = 0; mb < 3; ++mb)
    first_unit_inputs.insert(graphed[static_cast<std::size_t>(2 * mb)]->static_input(0).data_ptr());
  EXPECT_EQ(first_unit_inputs.size(), 2u) << "microbatch 2 reuses microbatch 0's buffers (freed by B0)";
  const std::vector<at::Tensor> inputs{at::randn({8, 32}, options()), at::randn({8, 32}, options()),
                                       at::randn({8, 32}, options())};
  const auto run = [&](bool use_graphs) {
    zero_grads();
    const auto us = units();
    std::vector<at::Tensor> x(3), loss(3), result;
    const auto forward = [&](int mb) {
      x[static_cast<std::size_t>(mb)] = inputs[static_cast<std::size_t>(mb)].clone().requires_grad_();
      at::Tensor y = use_graphs
                         ? graphed[static_cast<std::size_t>(2 * mb)]->run({x[static_cast<std::size_t>(mb)]}, 0)[0]
                         : us[0].forward({x[static_cast<std::size_t>(mb)]})[0];
      y = use_graphs ? graphed[static_cast<std::size_t>(2 * mb + 1)]->run({y}, 0)[0] : us[1].forward({y})[0];
      loss[static_cast<std::size_t>(mb)] = (y * y).sum();
    };
    const auto backward = [&](int mb) {
      loss[static_cast<std::size_t>(mb)].backward();
      result.push_back(x[static_cast<std::size_t>(mb)].grad().clone());
    };
    forward(0);
    forward(1);
    backward(0);
    forward(2);
    backward(1);
    backward(2);
    for (const auto& g : grads()) result.push_back(g);
    return result;
  };
  expect_all_equal(run(true), run(false), "input grads of microbatches 0-2, then accumulated param grads");
}

TEST_F(GraphedCallablesCudaTest, MismatchedArgumentsAreNamed) {
  SideStream::Use use(*stream_);
  const auto graphed =
      make_graphed_callables({units()[0]}, {{{at::randn({8, 32}, options()).requires_grad_()}, {}}}, {});
  const std::string fix =
      "; fix: call a graphed unit with tensors of exactly the shapes, dtypes, devices and requires-grad flags it was "
      "captured with (a graph replays fixed kernels on fixed buffers), or delete the graphs and capture again for "
      "the new shapes";
  EXPECT_EQ(error_text([&] {
              graphed[0]->run({at::randn({4, 32}, options()).requires_grad_()}, 0);
            }),
            "unit a (microbatch 0): argument 'x' (argument 0) has shape [4, 32], captured with [8, 32]" + fix);
  EXPECT_EQ(error_text([&] {
              graphed[0]->run({at::randn({8, 32}, options().dtype(at::kHalf)).requires_grad_()}, 0);
            }),
            "unit a (microbatch 0): argument 'x' (argument 0) has dtype Half, captured with Float" + fix);
  EXPECT_EQ(error_text([&] {
              graphed[0]->run({at::randn({8, 32}, options())}, 0);
            }),
            "unit a (microbatch 0): argument 'x' (argument 0) has requires_grad false, captured with true" + fix);
  EXPECT_EQ(error_text([&] { graphed[0]->run({}, 0); }),
            "unit a (microbatch 0) was called with 0 arguments but was captured with 1" + fix);
}

TEST_F(GraphedCallablesCudaTest, UnusedInputsAreNamedUnlessAllowedAndUnusedParametersDropped) {
  SideStream::Use use(*stream_);
  const at::Tensor unused_weight = at::randn({32}, options()).requires_grad_();
  GraphableUnit unit;
  unit.name = "first_only";
  unit.input_names = {"x", "y"};
  unit.parameters = {weights_[0], unused_weight};
  unit.parameter_names = {"used", "unused"};
  unit.forward = [w = weights_[0]](const std::vector<at::Tensor>& in) {
    return std::vector<at::Tensor>{at::matmul(in.at(0), w)};
  };
  const auto sample = [&] {
    return std::vector<UnitArguments>{
        {{at::randn({8, 32}, options()).requires_grad_(), at::randn({8, 32}, options()).requires_grad_()}, {}}};
  };
  EXPECT_EQ(error_text([&] { make_graphed_callables({unit}, sample(), {}); }),
            "unit first_only (microbatch 0): argument 'y' requires grad but no output depends on it; fix: pass it "
            "without requires_grad, or set allow_unused_input (its grad is then undefined)");
  GraphedCallablesOptions allow;
  allow.allow_unused_input = true;
  const auto graphed = make_graphed_callables({unit}, sample(), allow);
  EXPECT_EQ(graphed[0]->parameter_count(), 1) << "the unused parameter is dropped";
  zero_grads();
  const at::Tensor x = at::randn({8, 32}, options()).requires_grad_();
  const at::Tensor y = at::randn({8, 32}, options()).requires_grad_();
  graphed[0]->run({x, y}, 0)[0].sum().backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(y.grad().defined());
  EXPECT_FALSE(unused_weight.grad().defined());
  EXPECT_TRUE(weights_[0].grad().defined());
}

TEST_F(GraphedCallablesCudaTest, KeywordArgumentsAreStaticInputsToo) {
  SideStream::Use use(*stream_);
  GraphableUnit unit;
  unit.name = "scaled";
  unit.input_names = {"x"};
  unit.forward = [](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{in.at(0) * in.at(1)}; };
  UnitArguments sample{{at::randn({4}, options()).requires_grad_()}, {{"scale", at::ones({4}, options())}}};
  const auto graphed = make_graphed_callables({unit}, {sample}, {});
  const at::Tensor x = at::randn({4}, options()).requires_grad_();
  const at::Tensor scale = at::full({4}, 3.0, options());
  const at::Tensor out = graphed[0]->call({{x}, {{"scale", scale}}})[0];
  EXPECT_TRUE(at::equal(out, x.detach() * 3.0));
  out.sum().backward();
  EXPECT_TRUE(at::equal(x.grad(), scale));
  EXPECT_EQ(error_text([&] {
              graphed[0]->call({{x}, {{"factor", scale}}});
            }),
            "unit scaled (microbatch 0) was called with keyword arguments {factor} but was captured with {scale}; fix: "
            "pass exactly the keyword arguments of the capture");
  EXPECT_EQ(error_text([&] { graphed[0]->run({x}, 0); }),
            "unit scaled (microbatch 0) was captured with keyword arguments but called with positional ones only; fix: "
            "call it through GraphedCallable::call with the same keyword arguments");
}

TEST_F(GraphedCallablesCudaTest, DropoutMasksDifferPerReplayOnTheDefaultStream) {
  // No SideStream::Use: make_graphed_callables captures on a private stream, replays run here.
  GraphableUnit unit;
  unit.name = "dropout";
  unit.forward = [](const std::vector<at::Tensor>& in) {
    return std::vector<at::Tensor>{at::dropout(in.at(0), 0.5, true)};
  };
  const auto graphed = make_graphed_callables({unit}, {{{at::ones({4096}, options()).requires_grad_()}, {}}}, {});
  const at::Tensor x = at::ones({4096}, options()).requires_grad_();
  const at::Tensor first = graphed[0]->run({x}, 0)[0].clone();
  const at::Tensor second = graphed[0]->run({x}, 0)[0].clone();
  EXPECT_FALSE(at::equal(first, second)) << "the same mask twice";
  const double kept = (first != 0).to(at::kFloat).mean().item<double>();
  EXPECT_GT(kept, 0.4);
  EXPECT_LT(kept, 0.6);
}

TEST_F(GraphedCallablesCudaTest, ResetGraphsRefuseCalls) {
  SideStream::Use use(*stream_);
  const auto graphed =
      make_graphed_callables({units()[0]}, {{{at::randn({8, 32}, options()).requires_grad_()}, {}}}, {});
  const at::Tensor pending = graphed[0]->run({at::randn({8, 32}, options()).requires_grad_()}, 0)[0].sum();
  graphed[0]->reset();
  EXPECT_FALSE(graphed[0]->is_captured());
  EXPECT_EQ(error_text([&] {
              graphed[0]->run({at::randn({8, 32}, options()).requires_grad_()}, 0);
            }),
            "the graphs of unit a (microbatch 0) were deleted (reset) before this call; fix: capture again "
            "before calling it, and finish every backward pass before deleting the graphs");
  std::string message = "(no error)";
  try {
    pending.backward();
  } catch (const std::exception& error) {  // the autograd engine may rethrow it as its own type
    message = error.what();
  }
  EXPECT_NE(message.find("were deleted (reset) before the backward pass of an earlier call ran"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace graphed::capture
