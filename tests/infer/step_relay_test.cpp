// tests/infer/step_relay_test.cpp — an engine that does not schedule, driven only by what a scheduling engine's
// relay tells it, as a tensor-parallel follower is: two engines of one small model in one process, the first with
// a relay that keeps each step's order (as its header) and packed inputs, the second following them. At every step
// both draw the same tokens on the device, for greedy and sampled requests, chunked prompts, preemptions in a small
// cache, async scheduling (tokens in flight read from the follower's own drawn tokens), padded steps and steps no
// bucket serves (dense prompt segments), with log probabilities and min-p; penalties and constraints are refused.
#include "graphed/infer/step_relay.h"

#include <gtest/gtest.h>

#include <vector>

#include "graphed/infer/serving_engine.h"
#include "test_models.h"

namespace graphed::infer {
namespace {

/// Keeps what the scheduling engine would broadcast: each step's header and inputs.
class RecordingRelay final : public StepRelay {
 public:
  explicit RecordingRelay(int64_t max_requests) : max_requests_(max_requests) {}
  void announce(const StepOrder& order) override {
    at::Tensor header = at::zeros({step_order_length(max_requests_)}, at::kLong);
    encode_step_order(order, max_requests_, header);
    headers.push_back(header);
  }
  void share_inputs(at::Tensor& inputs) override { inputs_shared.push_back(inputs.clone()); }

  std::vector<at::Tensor> headers;
  std::vector<at::Tensor> inputs_shared;

 private:
  int64_t max_requests_;
};

struct RelayCase {
  testing::ModelStyle style = testing::ModelStyle::kLlama;
  bool decode_only_graphs = false;  ///< prompt steps match no bucket and run at their own size
};

ServingOptions relayed_engine(model::GptModel& model, const RelayCase& relay_case) {
  ServingOptions options;
  options.max_requests = 3;
  options.max_tokens = 16;
  options.block_size = 4;
  options.cuda_graph_max_tokens = 8;
  options.decode_only_cuda_graphs = relay_case.decode_only_graphs;
  // Room for 8 usable blocks of 4 positions: the requests below do not all fit at once, and some are preempted.
  options.buffer_size_gb = static_cast<double>(9 * bytes_per_block(model, 4, at::TensorOptions().dtype(at::kDouble))) /
                           (1024.0 * 1024.0 * 1024.0);
  return options;
}

RequestOptions relayed_request(std::size_t index) {
  RequestOptions options;
  options.max_new_tokens = 6 + static_cast<int64_t>(index);
  if (index % 2 == 1) {
    options.sampling.temperature = 1.2;
    options.sampling.top_k = 16;
    options.sampling.top_p = 0.9;
    options.sampling.seed = 90 + index;
  }
  if (index % 3 == 0) options.logprobs = 4;      // log probabilities work under tensor parallelism,
  if (index == 3) options.sampling.min_p = 0.1;  // and so does min-p (a row of the packed inputs)
  return options;
}

class StepRelayEngines : public ::testing::TestWithParam<RelayCase> {};

TEST_P(StepRelayEngines, AFollowerDrawsWhatTheSchedulerDrawsAtEveryStep) {
  model::GptModel model = testing::cpu_test_model(GetParam().style);
  const ServingOptions options = relayed_engine(model, GetParam());
  RecordingRelay relay(options.max_requests);
  ServingEngine scheduler(model, at::Device(at::kCPU), options, relay);
  ServingEngine follower(model, at::Device(at::kCPU), options);
  const std::vector<std::vector<int64_t>> prompts{
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, {9}, {10, 20, 30}, {5, 6, 7, 8, 9}, {41}};
  for (std::size_t i = 0; i < prompts.size(); ++i) scheduler.add_request(prompts[i], relayed_request(i));
  std::size_t followed = 0;
  for (int guard = 0; scheduler.has_work() && guard < 10000; ++guard) {
    scheduler.step();
    ASSERT_EQ(relay.inputs_shared.size(), relay.headers.size());
    if (relay.headers.size() == followed) continue;  // the call only read the last step's tokens
    ASSERT_EQ(relay.headers.size(), followed + 1);
    const StepOrder order = decode_step_order(relay.headers.back(), options.max_requests);
    const at::Tensor& inputs = relay.inputs_shared.back();
    follower.follow(order, [&inputs](at::Tensor& packed) { packed.copy_(inputs); });
    const int64_t requests = order.key.dimensions.request_count();
    EXPECT_TRUE(at::equal(follower.drawn_tokens(requests), scheduler.drawn_tokens(requests)))
        << "step " << followed << " " << order.key.describe() << ": the follower drew "
        << follower.drawn_tokens(requests) << ", the scheduler " << scheduler.drawn_tokens(requests);
    ++followed;
  }
  const EngineStats& scheduled = scheduler.stats();
  EXPECT_EQ(static_cast<int64_t>(followed), scheduled.steps);
  EXPECT_EQ(follower.stats().steps, scheduled.steps);
  EXPECT_EQ(follower.stats().unmatched_steps, scheduled.unmatched_steps);
  EXPECT_GT(scheduled.preemptions, 0);
  EXPECT_EQ(follower.blocks_in_use(), 0);  // it never took a request
  if (GetParam().decode_only_graphs || GetParam().style == testing::ModelStyle::kHybrid) {
    EXPECT_GT(scheduled.unmatched_steps, 0);
  } else {
    EXPECT_EQ(scheduled.unmatched_steps, 0);
  }
}

TEST(StepRelayEngines, ControlsAndConstraintsAreRefusedWhereOtherRanksFollow) {
  model::GptModel model = testing::cpu_test_model(testing::ModelStyle::kLlama);
  const ServingOptions options = relayed_engine(model, RelayCase{});
  RecordingRelay relay(options.max_requests);
  ServingEngine scheduler(model, at::Device(at::kCPU), options, relay);
  RequestOptions penalized = relayed_request(0);
  penalized.controls.presence_penalty = 0.5;
  const auto refused = scheduler.rejection({1, 2, 3}, penalized);
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->message().find("not served with tensor parallelism yet"), std::string::npos);
  EXPECT_FALSE(scheduler.rejection({1, 2, 3}, relayed_request(3)).has_value());  // logprobs and min-p are served
}

INSTANTIATE_TEST_SUITE_P(Models, StepRelayEngines,
                         ::testing::Values(RelayCase{testing::ModelStyle::kLlama, false},
                                           RelayCase{testing::ModelStyle::kLlama, true},
                                           RelayCase{testing::ModelStyle::kGpt2, false},
                                           RelayCase{testing::ModelStyle::kHybrid, false}),
                         [](const ::testing::TestParamInfo<RelayCase>& info) {
                           return std::string(testing::style_name(info.param.style)) +
                                  (info.param.decode_only_graphs ? "_decode_only_graphs" : "");
                         });

}  // namespace
}  // namespace graphed::infer
