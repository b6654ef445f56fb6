// tests/capture/local_record_test.cpp — the local implementation's buffer plan from a record of one
// iteration (research megatron-cudagraphs.md §2.7–2.8): the worked example of §2.8.2 (two layers
// reading a shared mask and rope table), outputs read by two graphs, grads that need no hand-off, and
// the order in which backward captures may hand grad buffers on.
#include "graphed/capture/local_record.h"

#include <gtest/gtest.h>

namespace graphed::capture {
namespace {

RecordedForward call(int64_t runner, std::vector<int64_t> inputs, std::vector<int64_t> outputs,
                     std::vector<bool> input_requires_grad = {}) {
  RecordedForward recorded;
  recorded.runner = runner;
  recorded.input_requires_grad =
      input_requires_grad.empty() ? std::vector<bool>(inputs.size(), true) : input_requires_grad;
  recorded.inputs = std::move(inputs);
  recorded.outputs = std::move(outputs);
  recorded.output_requires_grad.assign(recorded.outputs.size(), true);
  return recorded;
}

TEST(LocalRecordTest, WorkedExampleTwoLayersWithSharedMaskAndTable) {
  // L1(x, m, r) -> y1, then L2(y1, m, r) -> y2; tensors x=0, m=1, r=2, y1=3, y2=4; mask and table need no grad.
  LocalRecord record;
  record.add_forward(call(0, {0, 1, 2}, {3}, {true, false, false}));
  record.add_forward(call(1, {3, 1, 2}, {4}, {true, false, false}));
  record.add_backward(1);
  record.add_backward(0);
  ASSERT_EQ(record.entries().size(), 4u);
  const LocalBufferPlan plan = plan_local_buffers(record);
  const auto& first = plan.inputs.at(0);
  const auto& second = plan.inputs.at(1);
  EXPECT_EQ(first[0].source, InputSource::kFresh) << "x: read once, copied in every replay";
  EXPECT_EQ(first[1].source, InputSource::kShared);
  EXPECT_EQ(first[2].source, InputSource::kShared);
  EXPECT_NE(first[1].shared_buffer, first[2].shared_buffer);
  EXPECT_EQ(second[0].source, InputSource::kOutput) << "y1 is L1's static output: no copy";
  EXPECT_EQ(second[0].producer, 0);
  EXPECT_EQ(second[0].producer_output, 0);
  EXPECT_EQ(second[1].shared_buffer, first[1].shared_buffer) << "both layers read one mask buffer";
  EXPECT_EQ(second[2].shared_buffer, first[2].shared_buffer);
  EXPECT_EQ(plan.shared_buffer_users, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(plan.grad_outputs.at(1)[0].consumer, -1) << "y2 is read by no graph: a fresh grad buffer";
  EXPECT_EQ(plan.grad_outputs.at(0)[0].consumer, 1) << "y1's grad is L2's input grad, handed on without a copy";
  EXPECT_EQ(plan.grad_outputs.at(0)[0].consumer_input, 0);
}

TEST(LocalRecordTest, OutputReadByTwoGraphsGetsItsOwnGradBuffer) {
  // A -> y; B(y) and C(y): autograd sums the two grads, so no single input grad can serve.
  LocalRecord record;
  record.add_forward(call(0, {0}, {1}));
  record.add_forward(call(1, {1}, {2}));
  record.add_forward(call(2, {1}, {3}));
  record.add_backward(2);
  record.add_backward(1);
  record.add_backward(0);
  const LocalBufferPlan plan = plan_local_buffers(record);
  EXPECT_EQ(plan.inputs.at(1)[0].source, InputSource::kOutput);
  EXPECT_EQ(plan.inputs.at(2)[0].source, InputSource::kOutput);
  EXPECT_TRUE(plan.shared_buffer_users.empty()) << "a graph output is not a shared buffer";
  EXPECT_EQ(plan.grad_outputs.at(0)[0].consumer, -1);
}

TEST(LocalRecordTest, NoHandOffWithoutGradOrBeforeTheConsumersBackward) {
  // B reads A's output without grad: nothing to hand on.
  LocalRecord without_grad;
  without_grad.add_forward(call(0, {0}, {1}));
  without_grad.add_forward(call(1, {1}, {2}, {false}));
  without_grad.add_backward(1);
  without_grad.add_backward(0);
  EXPECT_EQ(plan_local_buffers(without_grad).grad_outputs.at(0)[0].consumer, -1);
  // A's backward recorded before B's: B's input grad does not exist yet when A's is captured.
  LocalRecord early;
  early.add_forward(call(0, {0}, {1}));
  early.add_forward(call(1, {1}, {2}));
  early.add_backward(0);
  early.add_backward(1);
  EXPECT_EQ(plan_local_buffers(early).grad_outputs.at(0)[0].consumer, -1);
}

TEST(LocalRecordTest, RunnerWithoutBackwardHasNoGradPlan) {
  // A router-like unit feeds a preprocess-like unit whose outputs need no grad: the preprocess runner
  // is recorded forward only.
  LocalRecord record;
  record.add_forward(call(0, {0}, {1, 2}));
  record.add_forward(call(1, {1, 2}, {3}, {false, false}));
  record.add_backward(0);
  EXPECT_FALSE(record.has_backward(1));
  const LocalBufferPlan plan = plan_local_buffers(record);
  EXPECT_EQ(plan.inputs.at(1)[0].producer_output, 0);
  EXPECT_EQ(plan.inputs.at(1)[1].producer_output, 1);
  EXPECT_EQ(plan.grad_outputs.count(1), 0u);
  EXPECT_EQ(plan.grad_outputs.at(0).size(), 2u);
}

}  // namespace
}  // namespace graphed::capture
