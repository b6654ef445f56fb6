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
