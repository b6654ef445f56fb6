// tests/kernels/prefill_tiles_test.cpp — the planner of the tile kernel's rows, on the CPU: a chunk cut into runs of
// 16 in chunk order, later chunks starting at later positions, padding chunks at one position, the zeroed rows
// after the last, and the bound max_prefill_tiles against every way of cutting small steps into chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <stdexcept>
#include <vector>

#include "graphed/kernels/prefill_tiles.h"

namespace graphed::kernels {
namespace {

using TileRow = std::array<int64_t, 4>;

/// The rows fill_prefill_tiles writes for `chunks` into room for `max_tiles`, and how many it used.
std::vector<TileRow> planned_rows(const std::vector<PrefillChunk>& chunks, int64_t max_tiles, int64_t* used) {
  std::vector<int64_t> flat(static_cast<std::size_t>(max_tiles * kPrefillTileFields), -7);
  *used = fill_prefill_tiles(chunks, max_tiles, flat.data());
  std::vector<TileRow> rows;
  for (int64_t t = 0; t < max_tiles; ++t) {
    const std::size_t at = static_cast<std::size_t>(t * kPrefillTileFields);
    rows.push_back({flat[at], flat[at + 1], flat[at + 2], flat[at + 3]});
  }
  return rows;
}

TEST(PrefillTilesTest, AChunkBecomesRunsOfSixteenAndTheRestIsZeros) {
  int64_t used = 0;
  const std::vector<TileRow> rows = planned_rows({{3, 1, 0, 40}}, 5, &used);
  EXPECT_EQ(used, 3);
  EXPECT_EQ(rows[0], (TileRow{3, 1, 0, 16}));
  EXPECT_EQ(rows[1], (TileRow{19, 1, 16, 16}));
  EXPECT_EQ(rows[2], (TileRow{35, 1, 32, 8}));
  EXPECT_EQ(rows[3], (TileRow{0, 0, 0, 0}));
  EXPECT_EQ(rows[4], (TileRow{0, 0, 0, 0}));
}

TEST(PrefillTilesTest, ChunksKeepTheirOrderAndALaterChunkItsPositions) {
  int64_t used = 0;
  // decode tokens 0..1 are not planned; a later chunk of a prompt (positions 300..316), then a first chunk of 1.
  const std::vector<TileRow> rows = planned_rows({{2, 2, 300, 17}, {19, 3, 0, 1}, {20, 4, 5, 0}}, 4, &used);
  EXPECT_EQ(used, 3);
  EXPECT_EQ(rows[0], (TileRow{2, 2, 300, 16}));
  EXPECT_EQ(rows[1], (TileRow{18, 2, 316, 1}));
  EXPECT_EQ(rows[2], (TileRow{19, 3, 0, 1}));
  EXPECT_EQ(rows[3], (TileRow{0, 0, 0, 0}));
}

TEST(PrefillTilesTest, PaddingTokensShareTheirPosition) {
  PrefillChunk padding{10, 5, 0, 20};
  padding.is_padding = true;
  int64_t used = 0;
  const std::vector<TileRow> rows = planned_rows({padding}, 2, &used);
  EXPECT_EQ(used, 2);
  EXPECT_EQ(rows[0], (TileRow{10, 5, 0, 16}));
  EXPECT_EQ(rows[1], (TileRow{26, 5, 0, 4}));
}

TEST(PrefillTilesTest, MoreTilesThanRoomIsABug) {
  int64_t used = 0;
  EXPECT_THROW(planned_rows({{0, 0, 0, 33}}, 2, &used), std::logic_error);
  EXPECT_THROW(planned_rows({{0, 0, -1, 3}}, 2, &used), std::logic_error);
  EXPECT_EQ(planned_rows({}, 0, &used).size(), 0u);
  EXPECT_EQ(used, 0);
}

TEST(PrefillTilesTest, TheBoundHoldsForEveryCutOfSmallSteps) {
  // Every composition of T tokens into at most R + 1 chunks (a chunk per request, and the padding chunk of the
  // last request) needs at most max_prefill_tiles(T, R) rows.
  for (int64_t requests = 1; requests <= 4; ++requests) {
    for (int64_t tokens = 0; tokens <= 40; ++tokens) {
      const int64_t bound = max_prefill_tiles(tokens, requests);
      int64_t worst = 0;
      std::function<void(int64_t, int64_t, int64_t)> cut = [&](int64_t left, int64_t chunks, int64_t tiles) {
        worst = std::max(worst, left == 0 ? tiles : 0);
        if (left == 0 || chunks == requests + 1) return;
        for (int64_t length = 1; length <= left; ++length) {
          cut(left - length, chunks + 1, tiles + (length + kPrefillTileTokens - 1) / kPrefillTileTokens);
        }
      };
      cut(tokens, 0, 0);
      EXPECT_LE(worst, bound) << tokens << " tokens, " << requests << " requests";
    }
  }
  EXPECT_EQ(max_prefill_tiles(512, 8), 40);
  EXPECT_EQ(max_prefill_tiles(0, 3), 3);
}

}  // namespace
}  // namespace graphed::kernels
