// kernels/prefill_tiles.h — the plan of a step's prompt tokens for the tile kernel of
// kernels/paged_prefill_attention.h: runs of up to kPrefillTileTokens consecutive tokens of one request, written
// as rows of int64 on the host (the engine copies them with the step's other inputs). Free of torch and CUDA, in
// both builds. It plans; it does not decide which tokens are prompt tokens (the scheduler does).
#pragma once

#include <cstdint>
#include <vector>

namespace graphed::kernels {

/// Tokens of one tile at most: the rows of one WMMA tile (16 x 16) per head.
constexpr int64_t kPrefillTileTokens = 16;

/// int64 fields of one tile row: (first token in the flat batch, request, first position, length).
/// length 0 marks an unused row.
constexpr int64_t kPrefillTileFields = 4;

/// A run of tokens of one request, consecutive in the flat batch.
struct PrefillChunk {
  int64_t first_token = 0;     ///< where its tokens start in the flat batch
  int64_t request = 0;         ///< the request's index in the step (its row of the block tables)
  int64_t first_position = 0;  ///< the position of its first token
  int64_t length = 0;          ///< how many tokens (0: no tile)
  /// The padding tokens of a padded step: every token sits at first_position (0) rather than at consecutive
  /// positions. A padded step passes them as one chunk per padding request (the tokens that request owns, which
  /// sit together after the real tokens), so that they take ceil(count / 16) tiles, not one each. The tile kernel
  /// reads each token's position from the step's positions, so these tiles give the reference's result too.
  bool is_padding = false;
};

/// A number of tile rows that holds the plan of any step of `tokens` tokens and `requests` requests: ceil(tokens /
/// 16) + requests. Why it holds: splitting a run into two adds at most one tile, so chunks of T tokens in all take
/// at most ceil(T / 16) + chunks - 1 tiles; a step has at most requests + 1 chunks (one per request, and the
/// padding chunk of the last request when every request is a real one, since the padding tokens then go to it).
int64_t max_prefill_tiles(int64_t tokens, int64_t requests);

/// Fills `tiles` ([max_tiles, kPrefillTileFields], row-major) with the chunks' tiles in chunk order: a chunk of
/// n tokens becomes ceil(n / 16) rows, each of 16 tokens but the last; a row's first position is that of its
/// first token (first_position + offset, or first_position for padding). Rows after the last are zeros (unused).
/// Returns the number of rows used. A plan that needs more than max_tiles rows, or a chunk with a negative
/// field, is a bug of the caller (GRAPHED_INTERNAL_ASSERT): size the rows with max_prefill_tiles.
int64_t fill_prefill_tiles(const std::vector<PrefillChunk>& chunks, int64_t max_tiles, int64_t* tiles);

}  // namespace graphed::kernels
