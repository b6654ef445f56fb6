// kernels/prefill_tiles.cpp — see kernels/prefill_tiles.h: a chunk cut into runs of kPrefillTileTokens, in chunk
// order, the rest of the rows zeroed.
#include "graphed/kernels/prefill_tiles.h"

#include <algorithm>

#include "graphed/util/error.h"

namespace graphed::kernels {

int64_t max_prefill_tiles(int64_t tokens, int64_t requests) {
  GRAPHED_INTERNAL_ASSERT(tokens >= 0 && requests >= 0, "a step of ", tokens, " tokens and ", requests, " requests");
  return (tokens + kPrefillTileTokens - 1) / kPrefillTileTokens + requests;
}

int64_t fill_prefill_tiles(const std::vector<PrefillChunk>& chunks, int64_t max_tiles, int64_t* tiles) {
  GRAPHED_INTERNAL_ASSERT(max_tiles >= 0 && (max_tiles == 0 || tiles != nullptr), "room for ", max_tiles, " tiles");
  int64_t used = 0;
  for (const PrefillChunk& chunk : chunks) {
    GRAPHED_INTERNAL_ASSERT(
        chunk.first_token >= 0 && chunk.request >= 0 && chunk.first_position >= 0 && chunk.length >= 0,
        "a prefill chunk of ", chunk.length, " tokens from token ", chunk.first_token, ", request ", chunk.request,
        ", position ", chunk.first_position);
    for (int64_t offset = 0; offset < chunk.length; offset += kPrefillTileTokens, ++used) {
      GRAPHED_INTERNAL_ASSERT(used < max_tiles, "the prefill chunks need more than ", max_tiles,
                              " tiles (size them with max_prefill_tiles)");
      int64_t* row = tiles + used * kPrefillTileFields;
      row[0] = chunk.first_token + offset;
      row[1] = chunk.request;
      row[2] = chunk.is_padding ? chunk.first_position : chunk.first_position + offset;
      row[3] = std::min(kPrefillTileTokens, chunk.length - offset);
    }
  }
  std::fill(tiles + used * kPrefillTileFields, tiles + max_tiles * kPrefillTileFields, int64_t{0});
  return used;
}

}  // namespace graphed::kernels
