// tests/serve/metrics_test.cpp — the Prometheus page: cumulative histogram buckets, counters by outcome and of
// structured requests, and the engine's gauges, step counters, step durations and mask work from a loop snapshot.
#include <gtest/gtest.h>

#include "graphed/serve/metrics.h"

namespace graphed::serve {
namespace {

bool has_line(const std::string& page, const std::string& line) { return page.find(line + "\n") != std::string::npos; }

TEST(HistogramTest, BucketsAreCumulativeAndEndAtInfinity) {
  Histogram histogram({0.1, 1.0});
  histogram.observe(0.05);
  histogram.observe(0.5);
  histogram.observe(3.0);
  std::string out;
  histogram.render("x", out);
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"0.1\"} 1")) << out;
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"1\"} 2")) << out;
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"+Inf\"} 3")) << out;
  EXPECT_TRUE(has_line(out, "x_sum 3.55")) << out;
  EXPECT_TRUE(has_line(out, "x_count 3")) << out;
}

TEST(ServerMetricsTest, CountsOutcomesTokensAndTheEngineState) {
  ServerMetrics metrics;
  metrics.count(Outcome::kCompleted);
  metrics.count(Outcome::kCompleted);
  metrics.count(outcome_of_status(429));
  metrics.count(outcome_of_status(400));
  metrics.count(outcome_of_status(503));
  metrics.record(12, 5, 0.02, 0.004, 0.04);
  LoopSnapshot snapshot;
  snapshot.queued = 3;
  snapshot.active = 2;
  snapshot.blocks_in_use = 7;
  snapshot.stats.graph_steps = 40;
  snapshot.stats.eager_steps = 2;
  snapshot.step_durations.observe(0.0004);
  snapshot.step_durations.observe(0.003);
  const std::string page = metrics.render(snapshot, 100, 16);
  EXPECT_TRUE(has_line(page, "graphed_requests_total{outcome=\"completed\"} 2")) << page;
  EXPECT_TRUE(has_line(page, "graphed_requests_total{outcome=\"refused\"} 1")) << page;
  EXPECT_TRUE(has_line(page, "graphed_requests_total{outcome=\"invalid\"} 1")) << page;
  EXPECT_TRUE(has_line(page, "graphed_requests_total{outcome=\"failed\"} 1")) << page;
  EXPECT_TRUE(has_line(page, "graphed_queued_requests 3")) << page;
  EXPECT_TRUE(has_line(page, "graphed_running_requests 2")) << page;
  EXPECT_TRUE(has_line(page, "graphed_kv_blocks_in_use 7")) << page;
  EXPECT_TRUE(has_line(page, "graphed_kv_blocks_total 100")) << page;
  EXPECT_TRUE(has_line(page, "graphed_prompt_tokens_total 12")) << page;
  EXPECT_TRUE(has_line(page, "graphed_generation_tokens_total 5")) << page;
  EXPECT_TRUE(has_line(page, "graphed_engine_steps_total{mode=\"graph\"} 40")) << page;
  EXPECT_TRUE(has_line(page, "graphed_engine_steps_total{mode=\"eager\"} 2")) << page;
  EXPECT_TRUE(has_line(page, "# TYPE graphed_step_duration_seconds histogram")) << page;
  EXPECT_TRUE(has_line(page, "graphed_step_duration_seconds_bucket{le=\"0.0005\"} 1")) << page;
  EXPECT_TRUE(has_line(page, "graphed_step_duration_seconds_bucket{le=\"0.003\"} 2")) << page;
  EXPECT_TRUE(has_line(page, "graphed_step_duration_seconds_bucket{le=\"10\"} 2")) << page;
  EXPECT_TRUE(has_line(page, "graphed_step_duration_seconds_bucket{le=\"+Inf\"} 2")) << page;
  EXPECT_TRUE(has_line(page, "graphed_step_duration_seconds_count 2")) << page;
  EXPECT_TRUE(has_line(page, "graphed_time_to_first_token_seconds_count 1")) << page;
  EXPECT_TRUE(has_line(page, "graphed_time_per_output_token_seconds_count 1")) << page;
  EXPECT_TRUE(has_line(page, "# TYPE graphed_request_duration_seconds histogram")) << page;
}

/// Structured requests by what asked for them (every source listed from the start), and the engine's masked steps
/// and the host's time on their masks.
TEST(ServerMetricsTest, CountsStructuredRequestsAndMaskWork) {
  ServerMetrics metrics;
  metrics.count_structured("json_schema");
  metrics.count_structured("json_schema");
  metrics.count_structured("tool_calls");
  LoopSnapshot snapshot;
  snapshot.stats.masked_steps = 12;
  snapshot.stats.verifications = 5;
  snapshot.stats.draft_tokens = 20;
  snapshot.stats.accepted_tokens = 9;
  snapshot.stats.mask_seconds = 0.25;
  const std::string page = metrics.render(snapshot, 100, 16);
  EXPECT_TRUE(has_line(page, "# TYPE graphed_structured_requests_total counter")) << page;
  EXPECT_TRUE(has_line(page, "graphed_structured_requests_total{source=\"json_schema\"} 2")) << page;
  EXPECT_TRUE(has_line(page, "graphed_structured_requests_total{source=\"json_object\"} 0")) << page;
  EXPECT_TRUE(has_line(page, "graphed_structured_requests_total{source=\"tool_calls\"} 1")) << page;
  EXPECT_TRUE(has_line(page, "graphed_masked_steps_total 12")) << page;
  EXPECT_TRUE(has_line(page, "graphed_spec_decode_num_drafts_total 5")) << page;
  EXPECT_TRUE(has_line(page, "graphed_spec_decode_draft_tokens_total 20")) << page;
  EXPECT_TRUE(has_line(page, "graphed_spec_decode_accepted_tokens_total 9")) << page;
  EXPECT_TRUE(has_line(page, "graphed_mask_seconds_total 0.25")) << page;
}

}  // namespace
}  // namespace graphed::serve
