// infer/step_inputs.h — a serving step's inputs on the device: the flat batch's token ids, positions,
// requests and cache slots, each request's block table, last token, state slot and sampling settings.
// They live in one int64 device buffer, sized once for the largest step and filled from pinned host
// memory by one copy per step of only what the step reads: a step of (tokens, requests) packs its sections
// at offsets fixed by that shape, so a graph captured for it reads the same addresses at every replay, and
// the views of a graphed shape are made once. Padding tokens write to the padding block 0 and padding requests are
// greedy, with empty block tables. A token drawn by a step still in flight (async scheduling) is read on the device
// from that step's drawn tokens: its source row is set, and PagedStep::begin takes it from there. The pinned host
// memory alternates between two buffers, so that filling one never races the copy of the step before.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/infer/logit_controls.h"
#include "graphed/infer/sampler.h"
#include "graphed/infer/scheduler.h"
#include "graphed/model/paged_batch.h"

namespace graphed::infer {

/// What a step's views take from its schedule beyond the buffers: made where the step is scheduled, and all that
/// another rank needs to make the same views over the same inputs (infer/step_order.h carries it).
struct ViewPlan {
  /// Tokens [0, decode_tokens) are one decode token each (a decode-only shape: every token, padding too).
  int64_t decode_tokens = 0;
  /// The longest context a token attends to: the graphed shapes' limit, or an eager step's own.
  int64_t max_context = 0;
  /// An eager step's prompt chunks, for dense attention; empty for a graphed shape (every token paged).
  std::vector<model::PrefillSegment> segments;
};

/// The plan of `schedule` padded to `tokens` tokens and `requests` requests. `paged_only`: every token through
/// paged attention with contexts up to `max_context` (a graphed shape); otherwise the prefill chunks are dense
/// segments and max_context is the step's own.
ViewPlan plan_views(const Schedule& schedule, int64_t tokens, int64_t requests, bool paged_only, int64_t max_context);

/// One step's views of the device buffers.
struct StepViews {
  model::PagedBatch batch;  ///< positions, requests, slots, block tables, state slots (+ the eager plan)
  at::Tensor token_ids;     ///< [1, tokens] int64 (0 where the token comes from token_source)
  /// [tokens] int64: -1, or the row of the previous step's drawn tokens that holds this token's id.
  at::Tensor token_source;
  at::Tensor previous_tokens;  ///< [max requests] int64: the previous step's drawn tokens (next_tokens' buffer)
  at::Tensor last_token;       ///< [requests] int64: the index of each request's last token in the batch
  SamplingRows sampling;       ///< [requests] each
  at::Tensor hidden;           ///< [1, tokens, hidden]: the embedded input (a static buffer)
  at::Tensor next_tokens;      ///< [requests] int64: where the step writes the drawn tokens
  SamplingMode mode = SamplingMode::kGreedy;
  SamplingFeatures features;
  ControlRows controls;  ///< [requests] each
  LogitTables tables;    ///< the requests' control tables (undefined until a request needs them)
  /// [requests, words] int32: the tokens each row may draw (structured output), written by the host per step.
  at::Tensor mask;
  at::Tensor logprobs;  ///< [requests, 1 + top] float32 out: the drawn token's, then the likeliest tokens'
  at::Tensor top_ids;   ///< [requests, top] int64 out: the likeliest tokens
};

class StepInputs {
 public:
  /// `vocabulary`: the tokens a step may draw (the width of its masks and log probabilities).
  StepInputs(int64_t max_tokens, int64_t max_requests, int64_t table_width, int64_t hidden_size,
             const at::TensorOptions& hidden_options, int64_t vocabulary);

  /// Fills the buffers for `schedule` padded to `tokens` tokens and `requests` requests (decode
  /// chunks first, as the scheduler orders them) and queues the copy to the device. A chunk's positions
  /// from its request's tokens.size() on are tokens in flight (the request's in_flight_row gives the row), or a
  /// verification's proposed tokens (ScheduledChunk::draft), whose rows draw the tokens after each proposal.
  /// The host memory of a load is reused two loads later: the caller reads a step's results (so the device
  /// has passed its input copy) before loading the step after next.
  void load(const Schedule& schedule, int64_t tokens, int64_t requests, int64_t block_size);
  /// The views of the last load (or of inputs received into packed_inputs), as `plan` says; `paged_only` as
  /// plan_views was given it.
  StepViews views(const ViewPlan& plan, int64_t tokens, int64_t requests, bool paged_only);
  /// The device buffer a step of (tokens, requests) reads, every section of it and nothing more: what load()
  /// has just copied, for the scheduling rank to send to the others, and where another rank receives it (a
  /// follower writes it there instead of loading).
  at::Tensor packed_inputs(int64_t tokens, int64_t requests) const;
  /// A follower, whose inputs arrive packed rather than by load(): the block size their cache slots were
  /// computed with (the views give it to attention).
  void set_block_size(int64_t block_size) { block_size_ = block_size; }

  /// The first `count` drawn tokens of the last step.
  at::Tensor next_tokens_view(int64_t count) const { return next_tokens_.narrow(0, 0, count); }
  /// The first `count` rows of the last step's log probabilities ([count, 1 + top] float32) and their ids.
  at::Tensor logprobs_view(int64_t count) const { return logprobs_.narrow(0, 0, count); }
  at::Tensor top_ids_view(int64_t count) const { return top_ids_.narrow(0, 0, count); }
  /// The likeliest tokens reported with each drawn one: kMaxTopLogprobs, or the whole vocabulary when smaller.
  int64_t top_count() const { return top_ids_.size(1); }

  /// Pinned host memory for the masks of a step of `requests` rows ([requests, words] int32, alternating like the
  /// inputs), and its copy into the device buffer the step's sampling reads (queued on the current stream).
  at::Tensor host_masks(int64_t requests);
  void copy_masks(const at::Tensor& host_masks);
  int64_t mask_words() const { return mask_.size(1); }

  /// The per-request control tables, made (zero) the first time a step needs them: max requests + 2 slots (slot 0
  /// neutral, the last a scratch slot for rows that keep no counts).
  const LogitTables& logit_tables();
  int64_t scratch_control_slot() const { return max_requests_ + 1; }
  int64_t max_tokens() const { return max_tokens_; }
  int64_t max_requests() const { return max_requests_; }

 private:
  /// Offsets of the sections in the packed buffer.
  enum Section {
    kTokens,
    kPositions,
    kTokenRequest,
    kSlots,
    kTokenSource,
    kLastToken,
    kStateSlots,
    kTopK,
    kSeedState,
    kDraw,
    kTemperature,
    kTopP,
    kControlSlot,
    kCountSlot,
    kPresence,
    kFrequency,
    kRepetition,
    kMinPGap,
    kBlockTables,
    kSplitCount,  ///< the step's decode tokens: the split kernel's, the rest the tile kernel's
    kTiles,       ///< the tile kernel's plan of the prompt and padding tokens (kernels/prefill_tiles.h)
    kSectionCount
  };
  /// Where a section starts in a step of (tokens, requests), and the values the step reads in all.
  int64_t offset(Section section, int64_t tokens, int64_t requests) const;
  int64_t section_size(Section section, int64_t tokens, int64_t requests) const;
  at::Tensor device_section(Section section, int64_t tokens, int64_t requests, int64_t count) const;
  /// The buffers' views of a step of (tokens, requests).
  StepViews make_views(int64_t tokens, int64_t requests) const;

  int64_t max_tokens_;
  int64_t max_requests_;
  int64_t table_width_;
  int64_t block_size_ = 1;  // of the last load
  at::Tensor host_[2];      // pinned int64, every section; loads alternate
  int64_t loads_ = 0;
  at::Tensor device_;         // int64, the same layout
  at::Tensor hidden_;         // [1, max tokens, hidden]
  at::Tensor next_tokens_;    // [max requests] int64
  at::Tensor logprobs_;       // [max requests, 1 + top] float32
  at::Tensor top_ids_;        // [max requests, top] int64
  at::Tensor mask_;           // [max requests, words] int32
  at::Tensor host_masks_[2];  // pinned, the same shape; steps alternate
  int64_t mask_loads_ = 0;
  LogitTables tables_;
  int64_t vocabulary_;
  std::map<std::pair<int64_t, int64_t>, StepViews> shapes_;  // the graphed shapes' views, by (tokens, requests)
};

}  // namespace graphed::infer
