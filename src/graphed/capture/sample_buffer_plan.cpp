// capture/sample_buffer_plan.cpp — see capture/sample_buffer_plan.h. A forward of chunk c takes the
// oldest buffer set released (by a completed backward) with the same signature, else a new one; a
// backward of chunk c releases the oldest outstanding forward of that chunk (one entry per layer).
#include "graphed/capture/sample_buffer_plan.h"

#include <cstdlib>
#include <deque>
#include <map>

#include "graphed/util/error.h"

namespace graphed::capture {

SampleBufferPlan plan_sample_buffers(const std::vector<int64_t>& order, const std::vector<int64_t>& layers_per_chunk,
                                     int64_t microbatches, const std::vector<std::vector<int64_t>>& signatures) {
  const auto chunks = static_cast<int64_t>(layers_per_chunk.size());
  GRAPHED_INTERNAL_ASSERT(static_cast<int64_t>(order.size()) == 2 * microbatches * chunks, "order of ", order.size(),
                          " entries for ", microbatches, " microbatches x ", chunks, " chunks");
  GRAPHED_INTERNAL_ASSERT(static_cast<int64_t>(signatures.size()) == chunks);
  std::vector<int64_t> prefix(static_cast<std::size_t>(chunks) + 1, 0);
  for (int64_t c = 0; c < chunks; ++c)
    prefix[static_cast<std::size_t>(c) + 1] =
        prefix[static_cast<std::size_t>(c)] + layers_per_chunk[static_cast<std::size_t>(c)];

  SampleBufferPlan plan;
  plan.buffer_of_entry.assign(static_cast<std::size_t>(prefix.back() * microbatches), -1);
  std::vector<std::deque<int64_t>> outstanding(static_cast<std::size_t>(chunks));  // entry indices, FIFO
  std::map<int64_t, std::deque<int64_t>> released;                                 // signature -> entries
  std::vector<int64_t> forwards(static_cast<std::size_t>(chunks), 0);
  for (const int64_t value : order) {
    GRAPHED_INTERNAL_ASSERT(value != 0 && std::abs(value) <= chunks, "order entry ", value);
    const auto chunk = static_cast<std::size_t>(std::abs(value) - 1);
    const int64_t layers = layers_per_chunk[chunk];
    if (value > 0) {
      const int64_t start = prefix[chunk] * microbatches + forwards[chunk] * layers;
      for (int64_t layer = 0; layer < layers; ++layer) {
        const int64_t entry = start + layer;
        const int64_t signature = signatures[chunk][static_cast<std::size_t>(layer)];
        outstanding[chunk].push_back(entry);
        auto& free = released[signature];
        if (!free.empty()) {
          plan.buffer_of_entry[static_cast<std::size_t>(entry)] =
              plan.buffer_of_entry[static_cast<std::size_t>(free.front())];
          free.pop_front();
        } else {
          plan.buffer_of_entry[static_cast<std::size_t>(entry)] = plan.unique_buffers++;
        }
      }
      ++forwards[chunk];
    } else {
      for (int64_t layer = 0; layer < layers && !outstanding[chunk].empty(); ++layer) {
        const int64_t entry = outstanding[chunk].front();
        outstanding[chunk].pop_front();
        const int64_t local = (entry - prefix[chunk] * microbatches) % layers;
        released[signatures[chunk][static_cast<std::size_t>(local)]].push_back(entry);
      }
    }
  }
  return plan;
}

}  // namespace graphed::capture
