// tests/infer/step_order_test.cpp — a step's order as one fixed-length header of int64 values: a step with prefill
// segments, a graphed decode step, stop and abort come back as they went, the largest plan engines of a given
// max requests can make fits, and a header of another length (engines built with other max requests) or with
// values no order has is refused as a bug.
#include "graphed/infer/step_order.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace graphed::infer {
namespace {

constexpr int64_t kOrderMaxRequests = 4;

at::Tensor unwritten_header(int64_t max_requests = kOrderMaxRequests) {
  return at::full({step_order_length(max_requests)}, -7, at::kLong);  // encoding must overwrite every value
}

StepOrder sent_and_received(const StepOrder& order, int64_t max_requests = kOrderMaxRequests) {
  at::Tensor header = unwritten_header(max_requests);
  encode_step_order(order, max_requests, header);
  return decode_step_order(header, max_requests);
}

void expect_same_order_segments(const std::vector<model::PrefillSegment>& got,
                                const std::vector<model::PrefillSegment>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].request, expected[i].request) << "segment " << i;
    EXPECT_EQ(got[i].first_token, expected[i].first_token) << "segment " << i;
    EXPECT_EQ(got[i].length, expected[i].length) << "segment " << i;
    EXPECT_EQ(got[i].first_position, expected[i].first_position) << "segment " << i;
  }
}

void expect_same_order(const StepOrder& got, const StepOrder& expected) {
  EXPECT_EQ(got.kind, expected.kind);
  EXPECT_EQ(got.key.dimensions, expected.key.dimensions);
  EXPECT_EQ(got.key.mode, expected.key.mode);
  EXPECT_EQ(got.matched, expected.matched);
  EXPECT_EQ(got.graphed, expected.graphed);
  EXPECT_EQ(got.plan.decode_tokens, expected.plan.decode_tokens);
  EXPECT_EQ(got.plan.max_context, expected.plan.max_context);
  expect_same_order_segments(got.plan.segments, expected.plan.segments);
}

/// An eager step no bucket served: two decodes, then two prompt chunks attended densely.
StepOrder eager_mixed_order() {
  StepOrder order;
  order.key = {{23, 2, 2}, SamplingMode::kFiltered};
  order.plan.decode_tokens = 2;
  order.plan.max_context = 40;
  order.plan.segments = {{2, 2, 16, 24}, {3, 18, 5, 0}};
  return order;
}

TEST(StepOrderTest, AStepWithSegmentsComesBackAsItWent) {
  const StepOrder order = eager_mixed_order();
  expect_same_order(sent_and_received(order), order);
}

TEST(StepOrderTest, AGraphedDecodeStepComesBackAsItWent) {
  StepOrder order;
  order.key = {{4, 0, 4}, SamplingMode::kTemperature};
  order.matched = true;
  order.graphed = true;
  order.plan.decode_tokens = 4;
  order.plan.max_context = 4096;
  expect_same_order(sent_and_received(order), order);
}

TEST(StepOrderTest, StopAndAbortComeBackAsTheyWent) {
  for (const StepOrder::Kind kind : {StepOrder::Kind::kStop, StepOrder::Kind::kAbort}) {
    StepOrder order;
    order.kind = kind;
    EXPECT_EQ(sent_and_received(order).kind, kind);
  }
}

TEST(StepOrderTest, TheLargestPlanOfTheMaxRequestsFits) {
  StepOrder order;
  order.key = {{4 * kOrderMaxRequests, kOrderMaxRequests, 0}, SamplingMode::kGreedy};
  order.plan.max_context = 64;
  for (int64_t request = 0; request < kOrderMaxRequests; ++request) {
    order.plan.segments.push_back({request, 4 * request, 4, 60});
  }
  EXPECT_EQ(step_order_length(kOrderMaxRequests), step_order_length(1) + 4 * (kOrderMaxRequests - 1));
  expect_same_order(sent_and_received(order), order);
  // One segment more than any step of these engines can have is a bug.
  order.plan.segments.push_back({0, 0, 1, 0});
  at::Tensor header = unwritten_header();
  EXPECT_THROW(encode_step_order(order, kOrderMaxRequests, header), std::logic_error);
}

TEST(StepOrderTest, AHeaderOfAnotherLengthIsRefused) {
  at::Tensor header = unwritten_header(kOrderMaxRequests + 1);  // a rank built with another max requests
  encode_step_order(eager_mixed_order(), kOrderMaxRequests + 1, header);
  EXPECT_THROW(decode_step_order(header, kOrderMaxRequests), std::logic_error);
  EXPECT_THROW(decode_step_order(header.narrow(0, 0, step_order_length(kOrderMaxRequests) - 1), kOrderMaxRequests),
               std::logic_error);
}

TEST(StepOrderTest, AHeaderWithValuesNoOrderHasIsRefused) {
  at::Tensor header = unwritten_header();
  encode_step_order(eager_mixed_order(), kOrderMaxRequests, header);
  at::Tensor torn = header.clone();
  torn.data_ptr<int64_t>()[0] = 9;  // no kind
  EXPECT_THROW(decode_step_order(torn, kOrderMaxRequests), std::logic_error);
  torn = header.clone();
  torn.data_ptr<int64_t>()[torn.numel() - 1] = 5;  // a value past the order's segments
  EXPECT_THROW(decode_step_order(torn, kOrderMaxRequests), std::logic_error);
}

}  // namespace
}  // namespace graphed::infer
