// tests/capture/random_stream_test.cpp — the model-parallel random stream on the CPU: work in a fork draws
// from the stream (its seed decides), the default generator continues as if that work never ran, forks
// advance the stream and an offset puts it back, and its state is listed while it lives and can be restored.
#include "graphed/capture/random_stream.h"

#include <gtest/gtest.h>

namespace graphed::capture {
namespace {

const at::Device kCpu(at::kCPU);

at::Tensor fork_draws(RandomStream& stream, int64_t count) {
  const RandomStream::Fork fork(stream);
  return at::rand({count});
}

TEST(RandomStreamTest, AForkDrawsFromTheStreamAndLeavesTheDefaultWhereItWas) {
  at::manual_seed(1);
  const at::Tensor undisturbed = at::rand({6});
  at::manual_seed(1);
  RandomStream rank_zero(kCpu, 2718, "model_parallel");
  const at::Tensor drawn = fork_draws(rank_zero, 4);
  EXPECT_TRUE(at::equal(at::rand({6}), undisturbed)) << "the default generator moved";
  RandomStream same_seed(kCpu, 2718, "again");
  EXPECT_TRUE(at::equal(fork_draws(same_seed, 4), drawn)) << "a stream is its seed";
  RandomStream rank_one(kCpu, 2719, "other");
  EXPECT_FALSE(at::equal(fork_draws(rank_one, 4), drawn)) << "another tensor rank's seed, another mask";
}

TEST(RandomStreamTest, ForksAdvanceTheStreamAndAnOffsetPutsItBack) {
  RandomStream stream(kCpu, 2718, "model_parallel");
  const at::Tensor first = fork_draws(stream, 3);
  at::rand({5});  // the default's draws in between do not touch the stream
  const at::Tensor second = fork_draws(stream, 3);
  EXPECT_FALSE(at::equal(first, second));
  EXPECT_EQ(stream.offset(), 2u);
  stream.set_offset(1);  // a resumed run: where the saved one stood
  EXPECT_TRUE(at::equal(fork_draws(stream, 3), second));
}

TEST(RandomStreamTest, ASnapshotPutsBackTheDefaultAndEveryStream) {
  // What capture code does around its warm-ups: neither the default generator nor a stream may move.
  at::manual_seed(4);
  RandomStream stream(kCpu, 2718, "model_parallel");
  const RandomStateSnapshot snapshot(kCpu);
  const at::Tensor stream_draws = fork_draws(stream, 3);
  const at::Tensor default_draws = at::rand({3});
  snapshot.restore();
  EXPECT_TRUE(at::equal(fork_draws(stream, 3), stream_draws));
  EXPECT_TRUE(at::equal(at::rand({3}), default_draws));
}

TEST(RandomStreamTest, LiveStreamsAreListedAndTheirStatesPutBack) {
  EXPECT_TRUE(random_streams(kCpu).empty());
  {
    RandomStream stream(kCpu, 5, "model_parallel");
    ASSERT_EQ(random_streams(kCpu).size(), 1u);
    EXPECT_EQ(random_streams(kCpu)[0], &stream);
    const auto saved = random_stream_states(kCpu);
    ASSERT_EQ(saved.size(), 1u);
    EXPECT_EQ(saved[0].first, "model_parallel");
    at::Tensor before, after;
    {
      const RandomStream::Fork fork(stream);
      before = at::rand({4});
    }
    restore_random_stream_states(kCpu, {saved.begin(), saved.end()});
    {
      const RandomStream::Fork fork(stream);
      after = at::rand({4});
    }
    EXPECT_TRUE(at::equal(before, after)) << "the restored stream repeats its draws";
  }
  EXPECT_TRUE(random_streams(kCpu).empty()) << "a destroyed stream left the list";
}

}  // namespace
}  // namespace graphed::capture
