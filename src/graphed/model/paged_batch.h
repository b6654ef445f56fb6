// model/paged_batch.h — one inference step of a serving engine as the model sees it: a flat batch of
// tokens from several requests ([1, tokens, hidden]), where each token's keys and values go into a
// paged cache (model::LayerCache with key/value [blocks, block size, groups, head dim] and Mamba states
// [state slots, ...]) and its attention reads the request's blocks. Built by infer/; the model only
// reads it.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/kernels/paged_attention_ops.h"

namespace graphed::model {

/// A run of prompt tokens of one request, attended densely (the eager prefill path).
struct PrefillSegment {
  int64_t request = 0;         ///< the request's index in the step
  int64_t first_token = 0;     ///< where its tokens start in the flat batch
  int64_t length = 0;          ///< how many tokens
  int64_t first_position = 0;  ///< the position of its first token (the cached context before it)
};

struct PagedBatch {
  kernels::PagedContext context;  ///< block tables [requests, width], token_request, positions [tokens]
  at::Tensor slots;               ///< [tokens] int64: the cache row (block x block size + offset) of each token
  at::Tensor state_slots;         ///< [requests] int64: each request's Mamba state slot
  int64_t block_size = 0;
  /// Tokens [0, decode_tokens) are one token each of requests [0, decode_tokens).
  int64_t decode_tokens = 0;
  /// The other tokens, by request, for the dense path (SDPA over the request's gathered blocks). Empty:
  /// every token goes through paged attention, and (for Mamba layers) every token is a decode token.
  std::vector<PrefillSegment> segments;

  int64_t token_count() const { return context.positions.size(0); }
};

}  // namespace graphed::model
