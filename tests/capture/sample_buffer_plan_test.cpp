// tests/capture/sample_buffer_plan_test.cpp — schedule-aware reuse of sample/static input buffers:
// research §3.3's worked examples, and the unique-buffer count does not grow with the microbatches.
#include "graphed/capture/sample_buffer_plan.h"

#include <gtest/gtest.h>

#include "capture/pipeline_order_for_test.h"

#include "graphed/capture/schedule_order.h"

namespace graphed::capture {
namespace {

TEST(SampleBufferPlanTest, TwoStagesOneChunkOfTwoLayers) {
  const auto plan = plan_sample_buffers({1, 1, -1, 1, -1, 1, -1, -1}, {2}, 4, {{7, 7}});
  EXPECT_EQ(plan.buffer_of_entry, (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(plan.unique_buffers, 4);
}

TEST(SampleBufferPlanTest, InterleavedTwoChunksMatchesWorkedExample) {
  const auto order = order_for(5, 2, 2, 0, 3);
  const auto plan = plan_sample_buffers(order, {1, 1}, 5, {{7}, {7}});
  EXPECT_EQ(plan.buffer_of_entry, (std::vector<int64_t>{0, 1, 2, 3, 4, 3, 4, 5, 5, 0}));
  EXPECT_EQ(plan.unique_buffers, 6);
}

TEST(SampleBufferPlanTest, DifferentSignaturesNeverShare) {
  const auto plan = plan_sample_buffers({1, 1, -1, 1, -1, 1, -1, -1}, {2}, 4, {{1, 2}});
  for (std::size_t entry = 0; entry < plan.buffer_of_entry.size(); ++entry) {
    for (std::size_t other = 0; other < plan.buffer_of_entry.size(); ++other) {
      if (entry % 2 != other % 2) EXPECT_NE(plan.buffer_of_entry[entry], plan.buffer_of_entry[other]);
    }
  }
}

TEST(SampleBufferPlanTest, UniqueBuffersDoNotGrowWithMicrobatches) {
  for (const auto& [pipeline, chunks, group] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{2, 1, 1}, {4, 1, 1}, {2, 2, 2}, {4, 2, 4}}) {
    for (int64_t rank = 0; rank < pipeline; ++rank) {
      int64_t first = -1;
      for (const int64_t microbatches : {16, 64, 256}) {
        const std::vector<int64_t> layers(static_cast<std::size_t>(chunks), 3);
        const std::vector<std::vector<int64_t>> signatures(static_cast<std::size_t>(chunks),
                                                           std::vector<int64_t>(3, 1));
        const auto plan = plan_sample_buffers(order_for(microbatches, chunks, pipeline, rank, group), layers,
                                              microbatches, signatures);
        const auto entries = static_cast<int64_t>(plan.buffer_of_entry.size());
        EXPECT_EQ(entries, 3 * chunks * microbatches);
        EXPECT_LT(plan.unique_buffers, entries) << "PP " << pipeline << " rank " << rank << ": some reuse";
        if (first < 0) first = plan.unique_buffers;
        EXPECT_EQ(plan.unique_buffers, first)
            << "PP " << pipeline << " VPP " << chunks << " rank " << rank << " M " << microbatches;
      }
    }
  }
}

}  // namespace
}  // namespace graphed::capture
