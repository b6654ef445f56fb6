// tests/capture/pipeline_order_for_test.h — the forward/backward order of one pipeline rank, built the
// way the per-layer engine will: warmup count, schedule table, conversion.
#pragma once

#include <vector>

#include "graphed/capture/schedule_order.h"

namespace graphed::capture {

inline std::vector<int64_t> order_for(int64_t microbatches, int64_t chunks, int64_t pipeline, int64_t rank,
                                      int64_t group) {
  PipelineRank r{microbatches, chunks, pipeline, rank, group};
  return convert_schedule_table_to_order(warmup_microbatches(r), chunks, schedule_table(microbatches, chunks, group));
}

}  // namespace graphed::capture
