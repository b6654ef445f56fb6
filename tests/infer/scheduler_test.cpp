// tests/infer/scheduler_test.cpp — the block pool and the scheduler without a model: blocks handed out
// all or nothing and returned, decode requests before prompts, prompts chunked under the step's token
// limit, admission only when a request's blocks fit, the request limit, and preemption of the most
// recently admitted request when a running one needs a block (never a crash, and everything returns).
#include "graphed/infer/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "graphed/util/error.h"

namespace graphed::infer {
namespace {

TEST(BlockPool, HandsOutAllOrNothingAndNeverThePaddingBlock) {
  BlockPool pool(5);
  EXPECT_EQ(pool.usable(), 4);
  EXPECT_FALSE(pool.allocate(5).has_value());
  EXPECT_EQ(pool.free_count(), 4);
  const auto first = pool.allocate(3);
  ASSERT_TRUE(first.has_value());
  for (const int64_t block : *first) EXPECT_GE(block, 1);
  EXPECT_FALSE(pool.allocate(2).has_value());
  EXPECT_EQ(pool.used_count(), 3);
  for (const int64_t block : pool.release(*first)) pool.free(block);
  EXPECT_EQ(pool.used_count(), 0);
  EXPECT_EQ(pool.peak_used(), 3);
  EXPECT_THROW(pool.release({1}), std::logic_error);  // not in use: an internal assertion
  EXPECT_THROW(BlockPool(1), ConfigError);
}

/// Requests owned by the test; the scheduler holds pointers.
struct Fixture {
  explicit Fixture(SchedulerLimits limits, int64_t blocks) : pool(blocks), scheduler(limits, pool) {}
  Request* add(int64_t prompt_length, int64_t id) {
    auto request = std::make_unique<Request>();
    request->id = id;
    request->tokens.resize(static_cast<std::size_t>(prompt_length));
    std::iota(request->tokens.begin(), request->tokens.end(), 1);
    request->prompt_length = prompt_length;
    scheduler.add(request.get());
    requests.push_back(std::move(request));
    return requests.back().get();
  }
  /// What the engine does after a step: sampling chunks draw token 7 (the scheduler moved `computed` on).
  void complete(const Schedule& schedule) {
    for (const auto& chunk : schedule.chunks) {
      if (chunk.samples) chunk.request->tokens.push_back(7);
    }
  }
  BlockPool pool;
  Scheduler scheduler;
  std::vector<std::unique_ptr<Request>> requests;
};

TEST(Scheduler, ChunksAPromptUnderTheTokenLimitAndDecodesFirst) {
  Fixture f({/*max_requests=*/4, /*max_tokens=*/8, /*block_size=*/4, true}, 32);
  Request* a = f.add(3, 1);
  Schedule first = f.scheduler.next();
  ASSERT_EQ(first.chunks.size(), 1u);
  EXPECT_EQ(first.chunks[0].length, 3);
  EXPECT_TRUE(first.chunks[0].samples);
  EXPECT_FALSE(first.chunks[0].decode);
  f.complete(first);
  Request* b = f.add(12, 2);  // longer than the 7 tokens left after a's decode token
  Schedule second = f.scheduler.next();
  ASSERT_EQ(second.chunks.size(), 2u);
  EXPECT_EQ(second.chunks[0].request, a);
  EXPECT_TRUE(second.chunks[0].decode);
  EXPECT_EQ(second.chunks[1].request, b);
  EXPECT_EQ(second.chunks[1].length, 7);
  EXPECT_FALSE(second.chunks[1].samples);  // the rest of the prompt comes next step
  EXPECT_EQ(second.token_count(), 8);
  EXPECT_EQ(second.decode_count(), 1);
  f.complete(second);
  Schedule third = f.scheduler.next();
  ASSERT_EQ(third.chunks.size(), 2u);
  EXPECT_EQ(third.chunks[1].first, 7);
  EXPECT_EQ(third.chunks[1].length, 5);
  EXPECT_TRUE(third.chunks[1].samples);
  EXPECT_EQ(static_cast<int64_t>(b->blocks.size()), 3);  // 12 positions in blocks of 4, taken at admission
}

TEST(Scheduler, WithoutChunkedPrefillAPromptWaitsForAStepItFits) {
  Fixture f({4, 8, 4, /*chunked_prefill=*/false}, 32);
  f.add(3, 1);
  f.complete(f.scheduler.next());
  f.add(8, 2);  // 8 tokens, and the decode token leaves 7
  const Schedule step = f.scheduler.next();
  EXPECT_EQ(step.chunks.size(), 1u);
  EXPECT_EQ(f.scheduler.waiting_count(), 1);
}

TEST(Scheduler, AdmitsOnlyWhatFitsTheRequestLimitAndTheBlocks) {
  Fixture f({/*max_requests=*/2, 64, 4, true}, /*blocks=*/4);  // 3 usable blocks
  f.add(4, 1);
  f.add(4, 2);
  f.add(4, 3);
  Schedule step = f.scheduler.next();
  EXPECT_EQ(step.chunks.size(), 2u);  // the request limit
  EXPECT_EQ(f.scheduler.waiting_count(), 1);
  f.complete(step);
  f.scheduler.remove(step.chunks[0].request);  // one finishes: its block goes back
  step = f.scheduler.next();
  ASSERT_EQ(step.chunks.size(), 2u);
  EXPECT_EQ(step.chunks[1].request->id, 3);
  Fixture g({4, 64, 4, true}, 3);  // 2 usable blocks, a 12-token prompt needs 3
  g.add(12, 1);
  EXPECT_TRUE(g.scheduler.next().chunks.empty());
}

TEST(Scheduler, PreemptsTheLatestRequestWhenBlocksRunOutAndEverythingReturns) {
  Fixture f({4, 64, /*block_size=*/2, true}, /*blocks=*/5);  // 4 usable blocks
  Request* a = f.add(2, 1);
  Request* b = f.add(2, 2);
  Schedule step = f.scheduler.next();  // a and b take one block each
  f.complete(step);
  step = f.scheduler.next();  // each decodes into a second block: 4 in use
  EXPECT_EQ(f.pool.used_count(), 4);
  f.complete(step);
  step = f.scheduler.next();  // position 3 of each still fits their second blocks
  EXPECT_TRUE(step.preempted.empty());
  f.complete(step);
  step = f.scheduler.next();  // a needs a third block: b is preempted, and waits
  ASSERT_EQ(step.preempted.size(), 1u);
  EXPECT_EQ(step.preempted[0], b->id);
  ASSERT_EQ(step.chunks.size(), 1u);
  EXPECT_EQ(step.chunks[0].request, a);
  EXPECT_EQ(b->computed, 0);
  EXPECT_EQ(b->preemptions, 1);
  EXPECT_EQ(f.scheduler.waiting_count(), 1);
  f.complete(step);
  f.scheduler.remove(a);  // a finishes: b comes back and recomputes its prompt and its drawn tokens
  step = f.scheduler.next();
  ASSERT_EQ(step.chunks.size(), 1u);
  EXPECT_EQ(step.chunks[0].request, b);
  EXPECT_EQ(step.chunks[0].length, static_cast<int64_t>(b->tokens.size()));
  EXPECT_FALSE(step.chunks[0].decode);
  f.scheduler.remove(b);
  EXPECT_EQ(f.pool.used_count(), 0);
  EXPECT_TRUE(f.scheduler.idle());
}

TEST(BlockPool, ParkedBlocksCountAsFreeComeBackWhenSharedAndGoOldestFirst) {
  BlockPool pool(5);  // 4 usable
  const auto blocks = *pool.allocate(4);
  for (const int64_t block : pool.release({blocks[0], blocks[1]})) pool.park(block);
  EXPECT_EQ(pool.free_count(), 2);
  EXPECT_EQ(pool.used_count(), 2);
  pool.share(blocks[1]);  // taken back by a request with the same prefix
  EXPECT_FALSE(pool.is_parked(blocks[1]));
  EXPECT_EQ(pool.used_count(), 3);
  std::vector<int64_t> evicted;
  const auto fresh = pool.allocate(1, &evicted);
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(evicted, (std::vector<int64_t>{blocks[0]}));  // no plain free block: the parked one goes
  EXPECT_FALSE(pool.allocate(1).has_value());
}

TEST(PrefixCache, MatchesWholeBlocksInOrderAndForgetsFreedOnes) {
  PrefixCache cache;
  const std::vector<int64_t> tokens{1, 2, 3, 4, 5, 6, 7, 8, 9};
  const uint64_t first = PrefixCache::chain(0, tokens.data(), 4);
  const uint64_t second = PrefixCache::chain(first, tokens.data() + 4, 4);
  EXPECT_NE(first, second);
  EXPECT_NE(PrefixCache::chain(0, std::vector<int64_t>{2, 1, 3, 4}.data(), 4), first);  // order counts
  cache.insert(first, 7);
  cache.insert(second, 3);
  EXPECT_EQ(cache.match(tokens, 4, 10).blocks, (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(cache.match(tokens, 4, 1).blocks, (std::vector<int64_t>{7}));    // the limit
  EXPECT_TRUE(cache.match({1, 2, 3, 9, 5, 6, 7, 8}, 4, 10).blocks.empty());  // the first block differs
  cache.forget({7});
  EXPECT_TRUE(cache.match(tokens, 4, 10).blocks.empty());  // a chain stops at its first gap
  EXPECT_EQ(cache.size(), 1);
}

TEST(Scheduler, ARequestSharesTheBlocksOfARunningRequestsPromptPrefix) {
  Fixture f({4, 64, /*block_size=*/4, true, /*prefix_sharing=*/true}, 16);
  Request* a = f.add(10, 1);       // tokens 1..10: blocks [1..4], [5..8], [9, 10]
  f.complete(f.scheduler.next());  // a's two full blocks are known once scheduled
  Request* b = f.add(9, 2);        // tokens 1..9: the same first two blocks
  Request* c = f.add(8, 3);        // tokens 1..8: only the first block (its last token's block is computed)
  const Schedule step = f.scheduler.next();
  ASSERT_EQ(step.chunks.size(), 3u);
  EXPECT_EQ(step.chunks[1].request, b);
  EXPECT_EQ(step.chunks[1].first, 8);
  EXPECT_EQ(step.chunks[1].length, 1);
  EXPECT_EQ(step.chunks[2].request, c);
  EXPECT_EQ(step.chunks[2].first, 4);
  EXPECT_EQ(b->blocks[0], a->blocks[0]);
  EXPECT_EQ(b->blocks[1], a->blocks[1]);
  EXPECT_EQ(c->blocks[0], a->blocks[0]);
  EXPECT_NE(c->blocks[1], a->blocks[1]);
  EXPECT_EQ(f.scheduler.shared_tokens(), 8 + 4);
  f.scheduler.remove(a);  // the shared blocks stay for b and c
  EXPECT_EQ(f.pool.used_count(), 4);
  f.scheduler.remove(b);
  f.scheduler.remove(c);
  EXPECT_EQ(f.pool.used_count(), 0);
  // The prompt blocks stay parked: a later request with the same prefix takes them back.
  Request* d = f.add(9, 4);
  const Schedule later = f.scheduler.next();
  ASSERT_EQ(later.chunks.size(), 1u);
  EXPECT_EQ(later.chunks[0].request, d);
  EXPECT_EQ(later.chunks[0].first, 8);
  EXPECT_EQ(f.scheduler.shared_tokens(), 8 + 4 + 8);
  f.scheduler.remove(d);
  EXPECT_EQ(f.pool.used_count(), 0);
}

TEST(Scheduler, SchedulesADecodeWhoseTokenIsStillInFlightAndStopsAtTheLimit) {
  Fixture f({4, 16, /*block_size=*/4, true}, 16);
  Request* a = f.add(5, 1);
  a->options.max_new_tokens = 2;
  Schedule step = f.scheduler.next();  // the prompt, drawing the first token
  ASSERT_EQ(step.chunks.size(), 1u);
  EXPECT_EQ(a->computed, 5);
  a->in_flight = 1;  // launched, not read: the next step reads it on the device
  step = f.scheduler.next();
  ASSERT_EQ(step.chunks.size(), 1u);
  EXPECT_TRUE(step.chunks[0].decode);
  EXPECT_EQ(step.chunks[0].first, 5);
  EXPECT_EQ(a->computed, 6);
  a->in_flight = 2;  // the second token in flight too: the limit is reached
  EXPECT_TRUE(f.scheduler.next().chunks.empty());
  a->in_flight = 0;  // both read
  a->tokens.insert(a->tokens.end(), {7, 7});
  EXPECT_TRUE(f.scheduler.next().chunks.empty());
}

TEST(Scheduler, RefusesLimitsThatCannotWork) {
  BlockPool pool(4);
  EXPECT_THROW(Scheduler({0, 8, 4, true}, pool), ConfigError);
  EXPECT_THROW(Scheduler({8, 4, 4, true}, pool), ConfigError);  // fewer tokens than requests
}

}  // namespace
}  // namespace graphed::infer

namespace graphed::infer {
namespace {

TEST(Scheduler, ASpeculatingRequestVerifiesItsProposalsInTheRowsLeftAndWaitsForTheResult) {
  SpeculativeDecoding speculation;
  speculation.method = SpeculativeDecoding::Method::kNgram;
  speculation.num_tokens = 4;
  speculation.lookup = {/*tokens=*/4, /*longest=*/2, /*shortest=*/1};
  speculation.governed = false;
  BlockPool pool(32);
  Scheduler scheduler({/*max_requests=*/2, /*max_tokens=*/16, /*block_size=*/4, true, false, /*max_rows=*/4}, pool,
                      Speculator(speculation));
  Request a, b;
  a.id = 1;
  a.tokens = {1, 2, 3, 1, 2};
  b.id = 2;
  b.tokens = {5, 6, 5, 6};
  for (Request* request : {&a, &b}) {
    request->prompt_length = static_cast<int64_t>(request->tokens.size());
    request->options.max_new_tokens = 20;
    request->speculation.allowed = true;
    scheduler.add(request);
  }
  ASSERT_EQ(scheduler.next().chunks.size(), 2u);  // the prompts
  a.tokens.push_back(3);                          // a: 1 2 3 1 2 3 proposes 1 2 3 after "2 3"
  b.tokens.push_back(5);                          // b: 5 6 5 6 5 proposes 6 5 after "6 5"
  const Schedule verify = scheduler.next();
  ASSERT_EQ(verify.chunks.size(), 4u);  // 2 requests, and the 2 rows left take a's first proposals
  EXPECT_EQ(verify.chunks[0].request, &a);
  EXPECT_EQ(verify.chunks[0].proposals, (std::vector<int64_t>{1, 2}));
  for (int i = 1; i <= 2; ++i) {
    const ScheduledChunk& chunk = verify.chunks[static_cast<std::size_t>(i)];
    EXPECT_EQ(chunk.request, &a);
    EXPECT_EQ(chunk.draft, i);
    EXPECT_EQ(chunk.draft_index, i);
    EXPECT_EQ(chunk.first, 5 + i);
    EXPECT_TRUE(chunk.decode && chunk.samples);
  }
  EXPECT_EQ(verify.chunks[3].request, &b);
  EXPECT_TRUE(verify.chunks[3].proposals.empty());
  EXPECT_EQ(verify.decode_count(), 4);
  EXPECT_EQ(a.computed, 8);
  EXPECT_EQ(a.blocks.size(), 2u);
  // a's verification is unread: where its tokens go is unknown. b's text repeats: it waits for its token in flight
  // to propose from it. A request whose text does not repeat decodes on, a step ahead.
  a.speculation.verifying = true;
  a.in_flight = 3;
  b.in_flight = 1;
  EXPECT_TRUE(scheduler.next().chunks.empty());
  b.tokens = {5, 6, 7, 8, 9};
  const Schedule ahead = scheduler.next();
  ASSERT_EQ(ahead.chunks.size(), 1u);
  EXPECT_EQ(ahead.chunks[0].request, &b);
  EXPECT_TRUE(ahead.chunks[0].proposals.empty());
}

}  // namespace
}  // namespace graphed::infer
