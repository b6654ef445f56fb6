// kernels/paged_prefill_attention.h — attention of a step's prompt tokens over the paged key/value cache on
// tensor cores, flash-attention style, free of ATen (pointers, sizes, a stream). The prompt tokens come as tiles
// (kernels/prefill_tiles.h): up to 16 consecutive tokens of one request. A thread block per (tile, KV group, head
// subset of at most 8 heads): warp w takes head w of the subset, and its 16 query rows are the tile's tokens for
// that head, one WMMA tile (bf16 16x16x16, fp32 accumulators). The block walks the request's cache positions
// 0..(the tile's last position) in chunks of 64, each gathered through the block table into shared memory by
// all the block's threads (cp.async, two chunks in flight, so the next chunk's rows arrive while this one is
// used); every warp then takes S = Q K^T, masks the keys past each row's position, takes the online-softmax step
// in fp32 (running max and sum per row, FA2), and adds P (bf16) V into its output. So a tile reads its context
// once for the group's heads and 16 tokens, where the split kernel (kernels/paged_attention.h) reads it once
// per token. Deterministic: one warp owns a (token, head) from start to end, in a fixed order, no atomics, and a
// chunk whose keys a row masks leaves that row's state bit for bit as it was, so a token's result depends on
// neither the other tokens of its tile nor the other tiles of the launch. The grid depends only on the number
// of tile rows (an unused row's block returns at once), so a launch can be captured in a CUDA graph with room
// for the largest step. A programmatic dependent launch (detail/programmatic_launch.cuh); a launch that fails
// throws graphed::Error (detail/launch_check.h). The ATen face is kernels/paged_attention_ops.h.
#pragma once

#include <cstdint>

namespace graphed::kernels {

/// The shapes of one launch: query and output [tokens, heads, head_dim], caches [blocks, block_size, groups,
/// head_dim], block tables [requests, table_width], tiles [tiles, kPrefillTileFields], all int64 but the bf16 data.
struct PagedPrefillShape {
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t groups = 0;
  int64_t head_dim = 0;
  int64_t block_size = 0;
  int64_t table_width = 0;
  int64_t tiles = 0;  ///< tile rows, used or not: the grid's first dimension
};

/// Whether the kernel takes this attention's shape: heads a multiple of groups, head_dim 32, 64, 96 or 128.
bool paged_prefill_attention_fits(int64_t heads, int64_t groups, int64_t head_dim);

/// For each used row (first token, request, first position, length) of `tiles`, and each of its tokens t:
/// output[t] = softmax(scale q[t] k^T) v over the positions 0..positions[t] of request token_request[first
/// token] (the kernel takes each token's position and the tile's request from the step, as the split kernel
/// does, not from the row: a row says only which tokens). The tokens of a row must share a request; the
/// block tables must hold every position the tokens see. bf16 data, 16-byte aligned, contiguous; output tokens
/// that no row names are not written.
void launch_paged_prefill_attention(const void* query, const void* key_cache, const void* value_cache,
                                    const int64_t* block_tables, const int64_t* token_request, const int64_t* positions,
                                    const int64_t* tiles, void* output, const PagedPrefillShape& shape, float scale,
                                    void* stream);

}  // namespace graphed::kernels
