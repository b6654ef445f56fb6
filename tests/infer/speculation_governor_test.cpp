// tests/infer/speculation_governor_test.cpp — the governor takes turns measuring steps with and without speculation
// (tokens a second per running request, the first steps of a probe skipped) and runs the side that drew more for a
// stretch, longer while the same side keeps winning widely; the time of calls that handed out nothing goes to the
// next that does, and steps computing prompts are not measured.
#include "graphed/infer/speculation_governor.h"

#include <gtest/gtest.h>

namespace graphed::infer {
namespace {

using Governor = SpeculationGovernor;
constexpr int64_t kProbe = Governor::kSkipped + Governor::kMeasured;

/// Records `steps` calls of `tokens` tokens in `seconds` with `running` requests, checking the side each ran.
void run(Governor& governor, int64_t steps, bool speculating, double seconds, int64_t tokens, int64_t running = 4) {
  for (int64_t i = 0; i < steps; ++i) {
    ASSERT_EQ(governor.allows(), speculating) << "step " << i;
    governor.record(seconds, tokens, running, /*decode=*/true);
  }
}

TEST(SpeculationGovernor, MeasuresBothSidesThenRunsTheFasterForAStretchLongerAfterAWideWin) {
  Governor governor;
  run(governor, Governor::kShortStretch, true, 0.002, 8);  // speculation: 8 tokens in 2 ms
  run(governor, kProbe, false, 0.001, 4);  // without: 4 in 1 ms, the same rate: speculation keeps the tie, briefly
  EXPECT_DOUBLE_EQ(governor.speculative_rate(), governor.plain_rate());
  run(governor, Governor::kShortStretch, true, 0.003, 8);  // speculation slows down (a larger batch)
  run(governor, kProbe, false, 0.001, 4);                  // plain wins by 1.5 times
  EXPECT_LT(governor.speculative_rate(), governor.plain_rate());
  run(governor, Governor::kStretch, false, 0.001, 4);
  run(governor, kProbe, true, 0.003, 8);  // widely slower again: a stretch twice as long
  run(governor, 2 * Governor::kStretch, false, 0.001, 4);
  EXPECT_TRUE(governor.allows());
  EXPECT_EQ(governor.steps(), 2 * Governor::kShortStretch + 3 * kProbe + 3 * Governor::kStretch);
  EXPECT_EQ(governor.plain_steps(), 2 * kProbe + 3 * Governor::kStretch);
}

TEST(SpeculationGovernor, SkipsAProbesFirstStepsAndPromptStepsAndCountsTheTimeOfCallsThatDrewNothing) {
  Governor governor;
  // Only a stretch's last steps measure it: its first ones are slow here (the side before drains).
  run(governor, Governor::kShortStretch - Governor::kMeasured, true, 1.0, 1);
  governor.record(0.5, 8, 4, /*decode=*/false);  // a step computing prompts: not measured
  run(governor, Governor::kMeasured - 1, true, 0.001, 4);
  governor.record(0.002, 0, 4, true);  // it launched a step (or a draft proposed), and handed out nothing
  governor.record(0.001, 4, 4, true);  // its time goes to the next call
  EXPECT_DOUBLE_EQ(governor.speculative_rate(), 4 * Governor::kMeasured / (0.001 * 4 * (Governor::kMeasured + 2)));
  EXPECT_FALSE(governor.allows());
}

TEST(SpeculationGovernor, RatesAreByRunningRequests) {
  Governor governor;
  run(governor, Governor::kShortStretch, true, 0.001, 16, /*running=*/8);  // 2,000 tokens a second per request
  run(governor, kProbe, false, 0.001, 7, /*running=*/7);                   // 1,000 a request, with one request fewer
  EXPECT_DOUBLE_EQ(governor.speculative_rate(), 2000);
  EXPECT_DOUBLE_EQ(governor.plain_rate(), 1000);
  run(governor, Governor::kStretch, true, 0.001, 16, 8);  // a wide win: a full stretch
  EXPECT_FALSE(governor.allows());
}

TEST(SpeculationGovernor, MeasurementsAtAnotherLoadDecideNothing) {
  Governor governor;
  run(governor, Governor::kShortStretch, true, 0.001, 32, /*running=*/32);  // 1,000 tokens a second per request
  run(governor, kProbe, false, 0.001, 8, /*running=*/4);        // 2,000, but with 4 requests (a run's last ones)
  run(governor, Governor::kShortStretch, true, 0.001, 32, 32);  // the last stretch's side again, briefly
  run(governor, kProbe, false, 0.001, 64, 32);                  // at the same load: 2,000 against 1,000
  EXPECT_FALSE(governor.allows());
}

}  // namespace
}  // namespace graphed::infer
