// tests/train/output_paths_test.cpp — every output location is checked before the first iteration,
// with the flag, the path and the reason.
#include "graphed/train/output_paths.h"

#include <fstream>

#include <gtest/gtest.h>

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::train {
namespace {

std::string error_of(const config::TrainConfig& train) {
  try {
    check_output_paths(train);
  } catch (const DataError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(OutputPathsTest, SaveMustBeAWritableFolder) {
  const std::string root = make_temporary_directory("graphed-output-paths");
  const std::string file = join_path(root, "a-file");
  std::ofstream(file) << "x";
  config::TrainConfig train;
  train.save = file;
  EXPECT_EQ(error_of(train), "cannot write --save '" + file +
                                 "': it is a file, not a folder; fix: pass --save a "
                                 "folder you can write to (it is created if missing)");
  train.save = join_path(file, "below");
  EXPECT_EQ(error_of(train), "cannot write --save '" + file +
                                 "/below': Not a directory; fix: pass --save a folder "
                                 "you can write to (it is created if missing)");
  train.save = join_path(root, "new/nested");
  EXPECT_EQ(error_of(train), "(no error)");
  EXPECT_TRUE(is_directory(join_path(root, "new/nested")));
  EXPECT_TRUE(list_files(join_path(root, "new/nested")).empty()) << "the write probe is removed";
}

/// A fresh run into a folder whose latest checkpoint is iteration 1,500 would point it back at its own first
/// save: refused, naming the iteration and the ways out; so is going on there from another folder's earlier
/// checkpoint. Going on from that folder, from one of its own earlier checkpoints (a rollback), or from a
/// later checkpoint than it holds, is not.
TEST(OutputPathsTest, ASaveThatWouldRewindAnotherRunsLatestCheckpointIsRefused) {
  const std::string root = make_temporary_directory("graphed-output-paths");
  const std::string folder = join_path(root, "run");
  const auto checkpoint_at = [](const std::string& save, int64_t iteration) {
    const std::string digits = std::to_string(iteration);
    const std::string at = join_path(save, "iter_" + std::string(7 - digits.size(), '0') + digits);
    create_directories(at);
    std::ofstream(join_path(at, "trainer.json")) << "{\"iteration\": " << iteration << ", \"config\": {}}\n";
    std::ofstream(join_path(save, "latest_checkpointed_iteration.txt")) << iteration << "\n";
  };
  checkpoint_at(folder, 500);
  checkpoint_at(folder, 1500);
  config::TrainConfig train;
  train.save = folder;
  EXPECT_EQ(error_of(train),
            "--save folder '" + folder +
                "' holds a later run's checkpoints (latest: iteration 1500) and this run "
                "starts at iteration 0 (no --load): its first save would make that folder's latest checkpoint go back; "
                "fix: pass --load " +
                folder +
                " to go on from iteration 1500, or --save another folder (or remove that "
                "folder's checkpoints to start it over)");
  const std::string earlier = join_path(root, "earlier");
  checkpoint_at(earlier, 100);
  train.load = earlier;
  EXPECT_NE(error_of(train).find("and this run starts at iteration 100 (from --load " + earlier + ")"),
            std::string::npos);
  train.load = join_path(folder, "iter_0000500");  // a rollback within the folder, on purpose: a warning only
  EXPECT_EQ(error_of(train), "(no error)");
  train.load = folder;
  EXPECT_EQ(error_of(train), "(no error)");
  const std::string later = join_path(root, "later");
  checkpoint_at(later, 2000);
  train.load = later;
  EXPECT_EQ(error_of(train), "(no error)");
  train.load.reset();
  train.save = join_path(root, "empty");
  EXPECT_EQ(error_of(train), "(no error)");
}

TEST(OutputPathsTest, MetricsFileMustBeAFileThatCanBeOpened) {
  const std::string root = make_temporary_directory("graphed-output-paths");
  config::TrainConfig train;
  train.metrics_file = root;
  EXPECT_EQ(error_of(train), "cannot write --metrics-file '" + root +
                                 "': it is a folder, not a file; fix: pass "
                                 "--metrics-file a path in a writable folder (missing folders are created)");
  const std::string file = join_path(root, "a-file");
  std::ofstream(file) << "x";
  train.metrics_file = join_path(file, "metrics.jsonl");
  EXPECT_EQ(error_of(train), "cannot write --metrics-file '" + file +
                                 "/metrics.jsonl': Not a directory; fix: pass "
                                 "--metrics-file a path in a writable folder (missing folders are created)");
}

TEST(OutputPathsTest, MissingFoldersOfTheMetricsFileAreCreated) {
  // docs/report.md's first command, in an empty folder: --metrics-file runs/a/metrics.jsonl.
  const std::string root = make_temporary_directory("graphed-output-paths");
  config::TrainConfig train;
  train.metrics_file = join_path(root, "runs/a/metrics.jsonl");
  EXPECT_EQ(error_of(train), "(no error)");
  EXPECT_TRUE(is_directory(join_path(root, "runs/a")));
  EXPECT_TRUE(path_exists(join_path(root, "runs/a/metrics.jsonl")));
}

}  // namespace
}  // namespace graphed::train
