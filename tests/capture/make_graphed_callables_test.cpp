// tests/capture/make_graphed_callables_test.cpp — what make_graphed_callables checks before touching a
// GPU: the order and chunk layout (TE's _order rules, entry indexing), sample counts, hooks and
// devices, each with its message. The capture itself is tested on the GPU
// (make_graphed_callables_cuda_test.cpp).
#include "graphed/capture/make_graphed_callables.h"

#include <gtest/gtest.h>

#include "error_text.h"

namespace graphed::capture {
namespace {

using graphed::testing::error_text;

const std::string kOrderFix =
    "; fix: pass an order of +c (forward) and -c (backward) entries, 1-based chunk ids, each chunk's microbatches "
    "equally often forward and backward, no backward before its forward (capture/schedule_order.h builds one)";

TEST(GraphedCallablesLayoutTest, NoOrderIsOneChunkOneMicrobatch) {
  const GraphedCallablesLayout layout = graphed_callables_layout(3, {}, {});
  EXPECT_EQ(layout.order, (std::vector<int64_t>{1, -1}));
  EXPECT_EQ(layout.layers_per_chunk, (std::vector<int64_t>{3}));
  EXPECT_EQ(layout.microbatches, 1);
  EXPECT_EQ(layout.entry(0, 0, 2), 2);
}

TEST(GraphedCallablesLayoutTest, EntriesAreChunkMajorThenMicrobatchThenLayer) {
  // TransformerEngine's interleaved example: 2 chunks of 1 layer, 3 microbatches.
  const GraphedCallablesLayout te = graphed_callables_layout(2, {1, 2, 1, 2, -2, -1, 1, 2, -2, -1, -2, -1}, {});
  EXPECT_EQ(te.microbatches, 3);
  EXPECT_EQ(te.entry(1, 0, 0), 3);
  EXPECT_EQ(te.entry(1, 2, 0), 5);
  // 2 chunks of 2 and 1 units, 2 microbatches: prefix_layers[c] x M + mb x layers[c] + layer.
  const GraphedCallablesLayout uneven = graphed_callables_layout(3, {1, 1, 2, -2, 2, -2, -1, -1}, {2, 1});
  EXPECT_EQ(uneven.microbatches, 2);
  EXPECT_EQ(uneven.entry(0, 1, 1), 3);
  EXPECT_EQ(uneven.entry(1, 0, 0), 4);
  EXPECT_EQ(uneven.entry(1, 1, 0), 5);
}

TEST(GraphedCallablesLayoutTest, MalformedOrdersAreExplained) {
  EXPECT_EQ(error_text([] {
              graphed_callables_layout(2, {1, 0, -1, -1}, {});
            }),
            "order [1, 0, -1, -1] contains 0" + kOrderFix);
  EXPECT_EQ(error_text([] {
              graphed_callables_layout(2, {1, -1, 1}, {});
            }),
            "order [1, -1, 1] has 3 entries, not a multiple of 2 x 1 chunks" + kOrderFix);
  EXPECT_EQ(error_text([] {
              graphed_callables_layout(2, {-1, 1}, {});
            }),
            "order [-1, 1] runs a backward of chunk 1 before its forward" + kOrderFix);
  EXPECT_EQ(error_text([] {
              graphed_callables_layout(2, {1, 1, 1, -1}, {});
            }),
            "order [1, 1, 1, -1] runs chunk 1 forward more than 2 times" + kOrderFix);
  EXPECT_EQ(error_text([] {
              graphed_callables_layout(3, {1, 2, -2, -1}, {});
            }),
            "3 units cannot be split evenly over the 2 chunks of order [1, 2, -2, -1]; fix: pass layers_per_chunk");
  EXPECT_EQ(
      error_text([] {
        graphed_callables_layout(3, {1, 2, -2, -1}, {1, 1});
      }),
      "layers_per_chunk has 2 chunks and 2 units, but the order has 2 chunks and there are 3 units; fix: give one "
      "count per chunk of the order, summing to the number of units");
}

GraphableUnit scale_unit(const at::Tensor& weight) {
  GraphableUnit unit;
  unit.name = "scale";
  unit.forward = [weight](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{in.at(0) * weight}; };
  unit.parameters = {weight};
  unit.parameter_names = {"scale.weight"};
  unit.input_names = {"x"};
  return unit;
}

TEST(MakeGraphedCallablesTest, BadSamplesAreNamed) {
  const at::Tensor weight = at::ones({4}).requires_grad_();
  const GraphableUnit unit = scale_unit(weight);
  GraphedCallablesOptions options;
  EXPECT_EQ(error_text([&] {
              make_graphed_callables({unit}, {{{at::ones({4})}, {}}, {{at::ones({4})}, {}}}, options);
            }),
            "make_graphed_callables got 2 sample argument sets for 1 units x 1 microbatches; fix: pass one per (unit, "
            "microbatch), chunk-major, then microbatch, then unit");
  EXPECT_EQ(error_text([&] {
              make_graphed_callables({unit}, {{{at::ones({4})}, {}}}, options);
            }),
            "unit scale (microbatch 0): sample argument 'x' is on cpu; fix: CUDA graphs capture CUDA work only: pass "
            "samples on the GPU the unit runs on");
  options.warmup_iterations = 0;
  EXPECT_EQ(error_text([&] {
              make_graphed_callables({unit}, {{{at::ones({4})}, {}}}, options);
            }),
            "make_graphed_callables needs warmup_iterations >= 1, got 0; fix: warm up at least once (autotuning and "
            "lazy initialization must not happen inside a capture)");
}

TEST(MakeGraphedCallablesTest, InGraphAccumulationNeedsAllocatedGrads) {
  GraphedCallablesOptions options;
  options.accumulate_parameter_grads = true;
  EXPECT_EQ(error_text([&] {
              make_graphed_callables({scale_unit(at::ones({4}).requires_grad_())}, {{{at::ones({4})}, {}}}, options);
            }),
            "unit scale (microbatch 0): parameter 'scale.weight' has no grad tensor, but accumulate_parameter_grads "
            "accumulates into it inside the graph; fix: allocate every param.grad (zeros) before capturing, or turn "
            "accumulate_parameter_grads off");
}

TEST(MakeGraphedCallablesTest, ChainingTheFirstUnitOfAChunkIsRefused) {
  GraphedCallablesOptions options;
  options.chained_inputs = {true};
  EXPECT_EQ(error_text([&] {
              make_graphed_callables({scale_unit(at::ones({4}).requires_grad_())}, {{{at::ones({4})}, {}}}, options);
            }),
            "unit scale is chained to its predecessor but is the first unit of chunk 1; fix: chain only units that "
            "follow another unit of the same chunk");
  options.chained_inputs = {false, true};
  EXPECT_EQ(error_text([&] {
              make_graphed_callables({scale_unit(at::ones({4}).requires_grad_())}, {{{at::ones({4})}, {}}}, options);
            }),
            "chained_inputs has 2 entries for 1 units; fix: one flag per unit, or none");
}

TEST(MakeGraphedCallablesTest, HooksAtCaptureAreRejected) {
  const at::Tensor weight = at::ones({4}).requires_grad_();
  weight.register_hook([](const at::Tensor& grad) { return grad * 2; });
  EXPECT_EQ(error_text([&] {
              make_graphed_callables({scale_unit(weight)}, {{{at::ones({4})}, {}}}, {});
            }),
            "unit scale (microbatch 0): parameter 'scale.weight' has a gradient hook; fix: remove it while capturing "
            "(register hooks after the capture)");
  const at::Tensor plain = at::ones({4}).requires_grad_();
  const at::Tensor x = at::ones({4}).requires_grad_();
  x.register_hook([](const at::Tensor& grad) { return grad; });
  EXPECT_EQ(error_text([&] {
              make_graphed_callables({scale_unit(plain)}, {{{x}, {}}}, {});
            }),
            "unit scale (microbatch 0): sample argument 'x' has a gradient hook; fix: graphs replay captured work and "
            "would skip it: register hooks after the capture");
}

TEST(MakeGraphedCallablesTest, KeywordArgumentsFlattenAfterPositionalInNameOrder) {
  UnitArguments arguments;
  arguments.positional = {at::full({1}, 1.0)};
  arguments.keyword["zeta"] = at::full({1}, 3.0);
  arguments.keyword["alpha"] = at::full({1}, 2.0);
  const auto flat = arguments.flatten();
  ASSERT_EQ(flat.size(), 3u);
  EXPECT_EQ(flat[1].item<double>(), 2.0);
  EXPECT_EQ(flat[2].item<double>(), 3.0);
  GraphableUnit unit;
  unit.input_names = {"hidden"};
  EXPECT_EQ(arguments.names(unit), (std::vector<std::string>{"hidden", "alpha", "zeta"}));
}

}  // namespace
}  // namespace graphed::capture
