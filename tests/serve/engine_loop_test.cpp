// tests/serve/engine_loop_test.cpp — the engine behind one thread, on the CPU: 8 client threads submit
// and read concurrently and every request's tokens equal a full recompute; a client that cancels
// mid-stream gets its end as cancelled and the blocks come back; a full queue and a stopped loop refuse
// submissions; shutdown cancels what runs past the grace period. Every step that ran is timed once.
#include "graphed/serve/engine_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "infer/test_models.h"

namespace graphed::serve {
namespace {

using namespace std::chrono_literals;

infer::ServingOptions small_engine() {
  infer::ServingOptions options;
  options.max_requests = 4;
  options.max_tokens = 16;
  options.block_size = 4;
  return options;
}

infer::RequestOptions greedy(int64_t new_tokens) {
  infer::RequestOptions options;
  options.max_new_tokens = new_tokens;
  return options;
}

/// A model with room for long requests, so that a cancellation or a shutdown lands mid-stream.
model::GptModel long_context_model() {
  testing::TestModelShape shape;
  shape.sequence = 512;
  return testing::test_model(testing::ModelStyle::kGpt2, shape, at::kDouble);
}

/// Reads a stream to its end (at most 20 s); the tokens and the end.
std::pair<std::vector<int64_t>, infer::FinishedRequest> read_all(RequestStream& stream, int64_t cancel_after = -1) {
  std::vector<int64_t> tokens;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto event = stream.next(100ms);
    if (!event) continue;
    if (event->finished) return {tokens, *event->finished};
    tokens.push_back(*event->token);
    if (static_cast<int64_t>(tokens.size()) == cancel_after) stream.cancel();
  }
  ADD_FAILURE() << "a stream did not end in 20 s";
  return {tokens, {}};
}

TEST(EngineLoop, ConcurrentClientsGetTheirOwnTokens) {
  model::GptModel model = testing::cpu_test_model(testing::ModelStyle::kLlama);
  infer::ServingEngine engine(model, at::Device(at::kCPU), small_engine());
  EngineLoop loop(engine, 64);
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int64_t client = 0; client < 8; ++client) {
    clients.emplace_back([&, client] {
      for (int64_t round = 0; round < 2; ++round) {
        const std::vector<int64_t> prompt{client + 1, round + 2, 7, (client * 5 + round) % 60};
        const auto stream = loop.submit(prompt, greedy(5 + round));
        if (!stream) {
          ++failures;
          continue;
        }
        const auto [tokens, end] = read_all(*stream);
        if (end.reason != infer::FinishReason::kLength || tokens != end.tokens ||
            tokens != testing::recompute_greedy(model, prompt, 5 + round)) {
          ++failures;
        }
      }
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(failures.load(), 0);
  loop.shutdown(1s);
  EXPECT_EQ(loop.snapshot().blocks_in_use, 0);
  EXPECT_EQ(loop.snapshot().stats.output_tokens, 8 * (5 + 6));
  EXPECT_GT(loop.snapshot().stats.steps, 0);
  EXPECT_EQ(loop.snapshot().step_durations.count(), loop.snapshot().stats.steps);
}

TEST(EngineLoop, ACancelledStreamEndsAsCancelledAndItsBlocksComeBack) {
  model::GptModel model = long_context_model();
  infer::ServingEngine engine(model, at::Device(at::kCPU), small_engine());
  EngineLoop loop(engine, 8);
  const auto stream = loop.submit({1, 2, 3, 4, 5}, greedy(500));
  ASSERT_NE(stream, nullptr);
  const auto [tokens, end] = read_all(*stream, /*cancel_after=*/2);
  EXPECT_EQ(end.reason, infer::FinishReason::kCancelled);
  EXPECT_GE(tokens.size(), 2u);
  EXPECT_LT(tokens.size(), 500u);
  const auto other = loop.submit({9, 8, 7}, greedy(3));  // the loop goes on
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(read_all(*other).second.reason, infer::FinishReason::kLength);
  loop.shutdown(1s);
  EXPECT_EQ(loop.snapshot().blocks_in_use, 0);
}

TEST(EngineLoop, AFullQueueAndAStoppedLoopRefuseAndShutdownCancelsTheRest) {
  model::GptModel model = long_context_model();
  infer::ServingEngine engine(model, at::Device(at::kCPU), small_engine());
  {
    EngineLoop full(engine, 0);  // room for the engine's 4 running requests, none waiting
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < 4; ++i) streams.push_back(full.submit({1, 2}, greedy(500)));
    for (const auto& stream : streams) EXPECT_NE(stream, nullptr);
    EXPECT_EQ(full.submit({1, 2}, greedy(2)), nullptr);
    EXPECT_EQ(full.snapshot().active, 4);
    EXPECT_EQ(full.snapshot().queued, 0);
  }
  EngineLoop loop(engine, 8);
  const auto running = loop.submit({1, 2, 3}, greedy(500));
  ASSERT_NE(running, nullptr);
  ASSERT_TRUE(running->next(20s).has_value());  // it runs
  loop.shutdown(0ms);
  const auto [tokens, end] = read_all(*running);
  EXPECT_EQ(end.reason, infer::FinishReason::kCancelled);
  EXPECT_EQ(loop.submit({1, 2}, greedy(2)), nullptr);
  EXPECT_FALSE(loop.snapshot().accepting);
  EXPECT_EQ(engine.blocks_in_use(), 0);
}

}  // namespace
}  // namespace graphed::serve
