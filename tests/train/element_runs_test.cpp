// tests/train/element_runs_test.cpp — checkpoint tensors stored as runs of elements: runs written by two "ranks" read
// back into runs that cross them, and the refusals: a range no file holds, elements held twice, and a stored name that
// is not a run.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "graphed/train/element_runs.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/safetensors.h"

namespace graphed::train {
namespace {

class ElementRunsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(folder_.empty()); }
  void TearDown() override { remove_all(folder_); }
  /// Writes elements [begin, end) of `tensor` (its values: 0.5 x the element index) as rank `rank`'s file.
  void write_rank(int rank, const std::string& tensor, int64_t begin, int64_t end) const {
    write_element_runs(join_path(folder_, "rank" + std::to_string(rank) + ".safetensors"),
                       {{tensor, begin, at::arange(begin, end, at::kFloat) * 0.5}});
  }
  std::string folder_ = make_temporary_directory("graphed-element-runs");
};

/// The message of the CheckpointError `body` throws, or "" when it throws none.
template <typename Body>
std::string refusal(const Body& body) {
  try {
    body();
  } catch (const CheckpointError& error) {
    return error.what();
  }
  return "";
}

TEST_F(ElementRunsTest, RunsAcrossTheRanksFilesReadBackWhereverTheyAreCut) {
  write_rank(0, "w.exp_avg", 0, 10);
  write_rank(1, "w.exp_avg", 10, 25);
  const ElementRunIndex index(folder_);
  EXPECT_EQ(index.tensors(), (std::map<std::string, int64_t>{{"w.exp_avg", 25}}));
  // The whole tensor, and a run across the two files.
  const std::vector<ElementRun> wanted = {{"w.exp_avg", 0, at::zeros({25})}, {"w.exp_avg", 7, at::zeros({6})}};
  index.check_covers(wanted);
  index.read_into(wanted);
  EXPECT_TRUE(at::equal(wanted[0].values, at::arange(0, 25, at::kFloat) * 0.5));
  EXPECT_TRUE(at::equal(wanted[1].values, at::arange(7, 13, at::kFloat) * 0.5));
}

TEST_F(ElementRunsTest, ARangeNoFileHoldsIsNamed) {
  write_rank(0, "w.exp_avg", 0, 10);
  write_rank(2, "w.exp_avg", 12, 20);  // rank 1's file is missing
  const ElementRunIndex index(folder_);
  const std::string message = refusal([&] { index.check_covers({{"w.exp_avg", 0, at::zeros({20})}}); });
  EXPECT_NE(message.find("lack elements [10, 11) of 'w.exp_avg' (this run needs [0, 20))"), std::string::npos)
      << message;
  EXPECT_NE(refusal([&] {
              index.check_covers({{"v.exp_avg", 0, at::zeros({1})}});
            }).find("of 'v.exp_avg'"),
            std::string::npos);
}

TEST_F(ElementRunsTest, ElementsHeldTwiceAndNamesThatAreNotRunsAreRefused) {
  write_rank(0, "w.exp_avg", 0, 10);
  write_rank(1, "w.exp_avg", 8, 12);
  std::string message = refusal([&] { ElementRunIndex index(folder_); });
  EXPECT_NE(message.find("hold elements [8, 10) of 'w.exp_avg' twice"), std::string::npos) << message;
  remove_all(join_path(folder_, "rank1.safetensors"));
  write_safetensors(join_path(folder_, "rank1.safetensors"), {{"w.exp_avg", at::zeros({3})}});
  message = refusal([&] { ElementRunIndex index(folder_); });
  EXPECT_NE(message.find("holds 'w.exp_avg', not a run of float32 elements"), std::string::npos) << message;
}

}  // namespace
}  // namespace graphed::train
