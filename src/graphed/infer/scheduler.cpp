// infer/scheduler.cpp — see infer/scheduler.h.
#include "graphed/infer/scheduler.h"

#include <algorithm>

#include "graphed/util/error.h"

namespace graphed::infer {

const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStopToken: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kRejected: return "rejected";
  }
  return "?";
}

int64_t Schedule::token_count() const {
  int64_t count = 0;
  for (const auto& chunk : chunks) count += chunk.length;
  return count;
}

int64_t Schedule::decode_count() const {
  return std::count_if(chunks.begin(), chunks.end(), [](const ScheduledChunk& chunk) { return chunk.decode; });
}

Scheduler::Scheduler(SchedulerLimits limits, BlockPool& pool, Speculator speculator)
    : limits_(limits), pool_(pool), speculator_(std::move(speculator)) {
  if (limits_.max_rows == 0) limits_.max_rows = limits_.max_requests;
  GRAPHED_CHECK(limits_.max_rows >= limits_.max_requests, ConfigError, "a step holds ", limits_.max_rows,
                " rows, fewer than the ", limits_.max_requests, " requests it may decode; fix: give at least as many");
  GRAPHED_CHECK(limits_.max_requests >= 1, ConfigError, "the engine takes ", limits_.max_requests,
                " requests at once; fix: give at least 1");
  GRAPHED_CHECK(limits_.max_tokens >= limits_.max_requests, ConfigError, "a step holds ", limits_.max_tokens,
                " tokens, fewer than the ", limits_.max_requests,
                " requests a step may decode; fix: give at least as many tokens per step as requests");
  GRAPHED_CHECK(limits_.block_size >= 1, ConfigError, "the KV cache block holds ", limits_.block_size,
                " positions; fix: give at least 1");
  for (int64_t slot = limits_.max_requests; slot >= 1; --slot) free_slots_.push_back(slot);
}

void Scheduler::add(Request* request) {
  GRAPHED_INTERNAL_ASSERT(!request->tokens.empty() && request->computed == 0,
                          "a queued request has tokens and nothing cached");
  waiting_.push_back(request);
}

void Scheduler::release(Request& request) {
  for (const int64_t block : pool_.release(request.blocks)) {
    if (prefix_.knows(block)) {
      pool_.park(block);  // a later request with this prefix may take it back
    } else {
      pool_.free(block);
    }
  }
  request.blocks.clear();
  request.block_hashes.clear();
  if (request.state_slot != 0) free_slots_.push_back(request.state_slot);
  request.state_slot = 0;
  request.computed = 0;
}

void Scheduler::trim(Request& request) {
  // Its positions: those computed, and the next one (a verification's kept tokens are appended after this).
  const auto keep =
      static_cast<std::size_t>(blocks_for(std::max(request.length(), request.computed + 1), limits_.block_size));
  while (request.blocks.size() > keep) {
    const int64_t block = request.blocks.back();
    request.blocks.pop_back();
    for (const int64_t freed : pool_.release({block})) pool_.free(freed);  // past the prompt: never in the prefix cache
  }
}

void Scheduler::remove(Request* request) {
  const auto running = std::find(running_.begin(), running_.end(), request);
  if (running != running_.end()) running_.erase(running);
  const auto waiting = std::find(waiting_.begin(), waiting_.end(), request);
  if (waiting != waiting_.end()) waiting_.erase(waiting);
  release(*request);
}

bool Scheduler::grow(Request& request, int64_t tokens) {
  const int64_t missing = blocks_for(tokens, limits_.block_size) - static_cast<int64_t>(request.blocks.size());
  if (missing <= 0) return true;
  std::vector<int64_t> evicted;
  auto blocks = pool_.allocate(missing, &evicted);
  if (!blocks) return false;
  prefix_.forget(evicted);
  request.blocks.insert(request.blocks.end(), blocks->begin(), blocks->end());
  return true;
}

bool Scheduler::preempt_last(const Request* keep, Schedule& schedule) {
  if (running_.empty() || running_.back() == keep) return false;
  Request* victim = running_.back();
  running_.pop_back();
  release(*victim);
  ++victim->preemptions;
  waiting_.push_front(victim);
  schedule.preempted.push_back(victim->id);
  return true;
}

void Scheduler::record_computed(Request& request) {
  if (!limits_.prefix_sharing) return;
  const int64_t size = limits_.block_size;
  const int64_t cached = std::min(request.computed, request.prompt_length);
  while ((static_cast<int64_t>(request.block_hashes.size()) + 1) * size <= cached) {
    const auto index = static_cast<int64_t>(request.block_hashes.size());
    const uint64_t previous = index == 0 ? 0 : request.block_hashes.back();
    const uint64_t hash = PrefixCache::chain(previous, request.tokens.data() + index * size, size);
    prefix_.insert(hash, request.blocks[static_cast<std::size_t>(index)]);
    request.block_hashes.push_back(hash);
  }
}

int64_t Scheduler::admit(Request& request, int64_t budget, Schedule& schedule) {
  GRAPHED_INTERNAL_ASSERT(request.in_flight == 0, "a waiting request has every drawn token read");
  const auto total = static_cast<int64_t>(request.tokens.size());
  PrefixCache::Match shared;
  // Never the block of the last token: it is computed, so the step draws the next token from it.
  if (limits_.prefix_sharing)
    shared = prefix_.match(request.tokens, limits_.block_size, (total - 1) / limits_.block_size);
  const int64_t missing = blocks_for(total, limits_.block_size) - static_cast<int64_t>(shared.blocks.size());
  const auto parked =
      std::count_if(shared.blocks.begin(), shared.blocks.end(), [&](int64_t b) { return pool_.is_parked(b); });
  if (missing > pool_.free_count() - parked) return 0;  // the parked shared blocks stop counting as free
  if (!limits_.chunked_prefill && total - static_cast<int64_t>(shared.blocks.size()) * limits_.block_size > budget)
    return 0;
  for (const int64_t block : shared.blocks) pool_.share(block);
  request.blocks = shared.blocks;
  request.block_hashes = shared.hashes;
  request.computed = static_cast<int64_t>(shared.blocks.size()) * limits_.block_size;
  shared_tokens_ += request.computed;
  grow(request, total);
  return start(request, budget, schedule);
}

int64_t Scheduler::start(Request& request, int64_t budget, Schedule& schedule) {
  request.state_slot = free_slots_.back();
  free_slots_.pop_back();
  waiting_.pop_front();
  running_.push_back(&request);
  const int64_t pending = request.pending();
  const int64_t length = std::min(pending, budget);
  schedule.chunks.push_back({&request, request.computed, length, false, length == pending});
  return length;
}

Request* Scheduler::prompt_source(const Request& request) const {
  if (request.options.prompt_of == 0) return nullptr;
  for (Request* running : running_) {
    if (running->id == request.options.prompt_of) return running;
  }
  return nullptr;
}

int64_t Scheduler::admit_reusing(Request& request, Request& source, int64_t budget, Schedule& schedule) {
  GRAPHED_INTERNAL_ASSERT(request.in_flight == 0 && request.computed == 0 && request.generated() == 0,
                          "a request reusing another's prompt has drawn nothing");
  const int64_t size = limits_.block_size;
  const int64_t reused = request.prompt_length - 1;  // the last prompt token is computed again: it draws
  const int64_t full = reused / size;
  const bool partial = reused % size != 0;
  const int64_t missing = blocks_for(request.prompt_length, size) - full;
  if (missing > pool_.free_count()) return 0;
  request.blocks.assign(source.blocks.begin(), source.blocks.begin() + full);
  for (const int64_t block : request.blocks) pool_.share(block);
  if (partial) {
    std::vector<int64_t> evicted;
    const int64_t copy = pool_.allocate(1, &evicted)->front();
    prefix_.forget(evicted);
    schedule.block_copies.emplace_back(source.blocks[static_cast<std::size_t>(full)], copy);
    request.blocks.push_back(copy);
  }
  request.computed = reused;
  shared_tokens_ += reused;
  grow(request, request.prompt_length);
  return start(request, std::min<int64_t>(budget, 1), schedule);
}

std::vector<ScheduledChunk> Scheduler::add_proposals(std::vector<ScheduledChunk> decode, int64_t rows, int64_t budget) {
  // Which requests propose, and how many tokens each may: rows and tokens are set aside in order.
  const bool full = rows <= 0 || budget <= 0;  // the step has no room for any proposal
  std::vector<Proposer::Ask> asks;
  std::vector<std::size_t> asked;  // the chunk of each ask
  for (std::size_t i = 0; i < decode.size(); ++i) {
    Request& request = *decode[i].request;
    if (!speculator_.speculates(request) || request.in_flight > 0) continue;
    const int64_t room = std::min(
        {rows, budget, speculator_.proposal_limit(request), request.options.max_new_tokens - request.generated() - 1});
    if (room <= 0) {
      // A request that waited for its tokens to propose and finds the step full counts a miss: it stops waiting for
      // nothing. Room that others set aside is no miss (they may not use it all).
      if (full) speculator_.record(request, 0, 0);
      continue;
    }
    asks.push_back({&request, room});
    asked.push_back(i);
    rows -= room;
    budget -= room;
  }
  std::vector<std::vector<int64_t>> proposed =
      asks.empty() ? std::vector<std::vector<int64_t>>{} : speculator_.propose(asks);
  for (std::size_t a = 0; a < asks.size(); ++a) {
    ScheduledChunk& chunk = decode[asked[a]];
    std::vector<int64_t>& proposals = proposed[a];
    if (static_cast<int64_t>(proposals.size()) > asks[a].limit)
      proposals.resize(static_cast<std::size_t>(asks[a].limit));
    // Blocks for the proposed positions, none taken from another request: fewer proposals where the pool is short.
    while (!proposals.empty() && !grow(*chunk.request, chunk.first + 1 + static_cast<int64_t>(proposals.size()))) {
      proposals.pop_back();
    }
    if (proposals.empty()) speculator_.record(*chunk.request, 0, 0);  // nothing to verify: a miss
    chunk.proposals = std::move(proposals);
  }
  std::vector<ScheduledChunk> chunks;
  for (ScheduledChunk& chunk : decode) {
    const std::vector<int64_t> proposals = chunk.proposals;
    Request& request = *chunk.request;
    const int64_t first = chunk.first;
    chunks.push_back(std::move(chunk));
    for (std::size_t i = 0; i < proposals.size(); ++i) {
      ScheduledChunk draft{&request, first + 1 + static_cast<int64_t>(i), 1, true, true};
      draft.draft = proposals[i];
      draft.draft_index = static_cast<int64_t>(i) + 1;
      chunks.push_back(std::move(draft));
    }
  }
  return chunks;
}

Schedule Scheduler::next() {
  Schedule schedule;
  std::vector<ScheduledChunk> decode;
  std::vector<ScheduledChunk> prefill;
  int64_t budget = limits_.max_tokens;
  // Running requests, in admission order; preemption takes from the back, so never one scheduled already.
  for (std::size_t i = 0; i < running_.size(); ++i) {
    Request* request = running_[i];
    if (request->drawn_all()) continue;  // its last token is in flight: it ends when that is read
    // A verification on the device leaves its positions unknown until it is read; a speculating request whose text
    // repeats waits for its token in flight, to propose from every one of its tokens.
    if (request->speculation.verifying) continue;
    if (request->in_flight > 0 && speculator_.speculates(*request) && speculator_.worth_waiting(*request)) continue;
    const int64_t pending = request->pending();
    const bool decoding = pending == 1 && request->computed > 0;
    const int64_t length = std::min(pending, budget);
    if (length == 0) continue;  // the step is full: an unfinished prompt goes on next step
    bool fits = grow(*request, request->computed + length);
    while (!fits && preempt_last(request, schedule)) fits = grow(*request, request->computed + length);
    if (!fits) {  // the last running request itself: it waits, and its blocks go to the others
      running_.pop_back();
      release(*request);
      ++request->preemptions;
      waiting_.push_front(request);
      schedule.preempted.push_back(request->id);
      break;
    }
    budget -= length;
    (decoding ? decode : prefill).push_back({request, request->computed, length, decoding, length == pending});
  }
  // Waiting requests, in order, while they fit (none in a step that had to preempt: they would thrash).
  Schedule admitted;
  while (schedule.preempted.empty() && !waiting_.empty() && running_count() < limits_.max_requests && budget > 0) {
    Request& request = *waiting_.front();
    Request* source = prompt_source(request);
    // A request reusing another's prompt waits for it: computed by a step launched before this one.
    const bool source_ready = source != nullptr && source->computed >= source->prompt_length &&
                              source->generated() + source->in_flight > 0 && request.preemptions == 0;
    if (source != nullptr && !source_ready && request.preemptions == 0) break;
    const int64_t length =
        source_ready ? admit_reusing(request, *source, budget, admitted) : admit(request, budget, admitted);
    if (length == 0) break;
    budget -= length;
  }
  schedule.block_copies = std::move(admitted.block_copies);
  prefill.insert(prefill.end(), admitted.chunks.begin(), admitted.chunks.end());
  if (speculator_.enabled() && schedule.preempted.empty()) {
    const auto rows = static_cast<int64_t>(decode.size() + prefill.size());
    decode = add_proposals(std::move(decode), limits_.max_rows - rows, budget);
  }
  schedule.chunks = std::move(decode);
  schedule.chunks.insert(schedule.chunks.end(), prefill.begin(), prefill.end());
  for (const ScheduledChunk& chunk : schedule.chunks) {
    chunk.request->computed += chunk.length;
    record_computed(*chunk.request);
  }
  return schedule;
}

}  // namespace graphed::infer
