// tests/dist/peer_collectives_cuda_test.cpp — the one-shot peer-memory all-reduce on two GPUs: starts two
// ranks (tests/dist/peer_all_reduce_rank.cpp, each its own process, as CUDA's memory handles need) and
// requires both to pass every check. Skipped with fewer than two GPUs.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include "child_processes.h"
#include "cuda_test.h"
#include "dist/rank_launch.h"

namespace graphed::testing {
namespace {

class PeerCollectivesCudaTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    if (torch::cuda::device_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  }
};

TEST_F(PeerCollectivesCudaTest, TwoRanksSumExactlyEagerAndInGraphs) {
  const std::string folder = join_path(::testing::TempDir(), "peer-all-reduce-" + std::to_string(::getpid()));
  ASSERT_EQ(create_directories(folder), 0);
  const std::string store = join_path(folder, "store");
  std::vector<ProcessSpec> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back({{std::to_string(rank), store}, {}, {}, join_path(folder, "rank" + std::to_string(rank))});
  }
  const std::vector<ProcessResult> results = run_processes(ranks, std::chrono::seconds(180));
  for (const ProcessResult& result : results) EXPECT_EQ(result.exit_code, 0) << describe(results);
}

}  // namespace
}  // namespace graphed::testing
