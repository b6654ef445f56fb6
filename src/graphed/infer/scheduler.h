// infer/scheduler.h — continuous batching: which requests run in the next step and with how many
// tokens, under the step's request and token limits and the KV cache's free blocks. Requests that are
// decoding go first (one token each), then unfinished prompts continue, then waiting requests are
// admitted in arrival order, each only when the blocks of everything it has so far fit; a prompt
// longer than the step's remaining tokens runs in chunks (chunked prefill). When a running request
// needs a block and none is free, the most recently admitted request is preempted: its blocks and
// state slot go back, and it waits at the front of the queue to be computed again from its tokens.
// With prefix sharing, an admitted request takes the blocks of its prompt's leading full blocks that a
// running request already computed (infer/prefix_cache.h) and starts after them.
// Plain integers, no torch; the engine owns the requests.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "graphed/infer/block_pool.h"
#include "graphed/infer/prefix_cache.h"
#include "graphed/infer/request.h"
#include "graphed/infer/speculator.h"

namespace graphed::infer {

struct SchedulerLimits {
  int64_t max_requests = 1;  ///< requests in the engine at once (each one row of a step, without speculation)
  int64_t max_tokens = 1;    ///< tokens in one step (>= max_requests)
  int64_t block_size = 1;
  bool chunked_prefill = true;  ///< off: a prompt waits until it fits one step whole
  bool prefix_sharing = false;  ///< a request shares the blocks of a running request's identical prompt prefix
  /// Rows of one step: a chunk each, and a proposed token each (speculation); 0 = max_requests.
  int64_t max_rows = 0;
};

/// The tokens of one request in a step: positions [first, first + length) of its tokens. A verification (speculative
/// decoding) is a run of one-token decode chunks of one request: its last token, then each proposed token (`draft`),
/// every one drawing the token after it, as a request of its own over the same blocks would.
struct ScheduledChunk {
  Request* request = nullptr;
  int64_t first = 0;
  int64_t length = 0;
  bool decode = false;      ///< one token after the last, with its context cached (a decode request)
  bool samples = false;     ///< it reaches the end of the request's tokens, so the step draws the next
  int64_t draft = -1;       ///< a proposed token this chunk computes (-1: the request's own token)
  int64_t draft_index = 0;  ///< its place in the verification (0: the request's last token, i: the i-th proposal)
  /// On a verification's first chunk: the proposed tokens, which the chunks after it compute.
  std::vector<int64_t> proposals;
};

struct Schedule {
  std::vector<ScheduledChunk> chunks;  ///< decode chunks first, then prefill chunks
  std::vector<int64_t> preempted;      ///< ids of requests preempted while scheduling it
  /// (from, to): blocks whose keys and values the engine copies before the step (a request reusing another's
  /// prompt takes a copy of its partial last block).
  std::vector<std::pair<int64_t, int64_t>> block_copies;
  int64_t token_count() const;
  int64_t decode_count() const;
  int64_t prefill_count() const { return static_cast<int64_t>(chunks.size()) - decode_count(); }
};

class Scheduler {
 public:
  /// State slots are numbered 1..max_requests (0 is the padding slot). `speculator` says which requests verify
  /// proposed tokens and proposes them.
  Scheduler(SchedulerLimits limits, BlockPool& pool, Speculator speculator = Speculator());

  /// Queues a request (its tokens hold at least one token; it fits the pool alone, the engine checked).
  void add(Request* request);
  /// Drops a request wherever it is; its blocks and slot go back.
  void remove(Request* request);
  /// Gives back a running request's blocks past its positions, the computed ones and the next (the refused
  /// proposals' of a verification).
  void trim(Request& request);
  /// Prompt tokens taken from shared blocks so far.
  int64_t shared_tokens() const { return shared_tokens_; }
  /// The next step's chunks (empty when nothing waits or runs). Each scheduled request's `computed` moves
  /// on by its chunk's length here (the step computes it, and any later step runs after it on the device),
  /// so the next schedule may be made before this step's tokens are read. A request whose drawn and in-flight
  /// tokens reach its limit is not scheduled again.
  Schedule next();

  bool idle() const { return running_.empty() && waiting_.empty(); }
  int64_t running_count() const { return static_cast<int64_t>(running_.size()); }
  int64_t waiting_count() const { return static_cast<int64_t>(waiting_.size()); }
  const SchedulerLimits& limits() const { return limits_; }
  const Speculator& speculator() const { return speculator_; }
  /// Measures one step() call for speculation's governor (Speculator::record_step).
  void record_step(double seconds, int64_t tokens, bool decode) {
    speculator_.record_step(seconds, tokens, running_count(), decode);
  }

 private:
  /// Blocks for `tokens` tokens of `request`, allocating what it lacks; false when the pool is short.
  bool grow(Request& request, int64_t tokens);
  void release(Request& request);
  /// Preempts the last running request that is not `keep`; false when there is none.
  bool preempt_last(const Request* keep, Schedule& schedule);
  /// Admits the first waiting request if it fits (its shared prefix first); returns its chunk's length, 0 if not.
  int64_t admit(Request& request, int64_t budget, Schedule& schedule);
  /// The running request whose prompt `request` reuses (RequestOptions::prompt_of), or null.
  Request* prompt_source(const Request& request) const;
  /// Admits `request` over `source`'s computed prompt: its full blocks shared, the partial one copied, the last
  /// prompt token scheduled. Returns 1, or 0 when the blocks do not fit.
  int64_t admit_reusing(Request& request, Request& source, int64_t budget, Schedule& schedule);
  /// Moves the first waiting request to the running ones with `blocks` and `computed`, its pending tokens up to
  /// `budget` scheduled; returns their count.
  int64_t start(Request& request, int64_t budget, Schedule& schedule);
  /// Records a scheduled request's full prompt blocks for sharing (a no-op without prefix sharing).
  void record_computed(Request& request);
  /// Turns the decode chunks of speculating requests into verifications, within `rows` more rows and `budget` more
  /// tokens set aside in order; the proposer proposes for all of them at once (a draft model runs its steps for the
  /// batch). Returns the chunks with the proposals' chunks after their request's own.
  std::vector<ScheduledChunk> add_proposals(std::vector<ScheduledChunk> decode, int64_t rows, int64_t budget);

  SchedulerLimits limits_;
  BlockPool& pool_;
  Speculator speculator_;
  std::vector<Request*> running_;  // in admission order
  std::deque<Request*> waiting_;
  std::vector<int64_t> free_slots_;
  PrefixCache prefix_;
  int64_t shared_tokens_ = 0;
};

}  // namespace graphed::infer
