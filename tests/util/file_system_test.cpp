// tests/util/file_system_test.cpp — the POSIX file helpers: folders, whole-file reads and their errno.
#include "graphed/util/file_system.h"

#include <cerrno>
#include <fstream>

#include <gtest/gtest.h>

namespace graphed {
namespace {

TEST(FileSystemTest, CreateListReadRemove) {
  const std::string root = make_temporary_directory("file_system_test");
  ASSERT_FALSE(root.empty());
  ASSERT_EQ(create_directories(join_path(root, "a/b")), 0);
  EXPECT_TRUE(is_directory(join_path(root, "a/b")));
  std::ofstream(join_path(root, "a/b/x.txt")) << "hello";
  std::ofstream(join_path(root, "a/b/w.bin")) << "";
  EXPECT_EQ(list_files(join_path(root, "a/b")), (std::vector<std::string>{"w.bin", "x.txt"}));
  ASSERT_EQ(create_directories(join_path(root, "a/c")), 0);
  EXPECT_EQ(list_directories(join_path(root, "a")), (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(list_directories(join_path(root, "a/b")).empty());
  std::string contents;
  EXPECT_EQ(read_file(join_path(root, "a/b/x.txt"), contents), 0);
  EXPECT_EQ(contents, "hello");
  EXPECT_EQ(file_size(join_path(root, "a/b/x.txt")), 5);
  EXPECT_EQ(extension_of("a/b.c/x.txt"), ".txt");
  EXPECT_EQ(extension_of("a/b.c/x"), "");
  EXPECT_EQ(read_file(join_path(root, "missing"), contents), ENOENT);
  EXPECT_EQ(read_file(join_path(root, "a"), contents), EISDIR);
  EXPECT_EQ(remove_all(root), 0);
  EXPECT_FALSE(path_exists(root));
  EXPECT_EQ(remove_all(root), 0) << "removing what is not there is fine";
}

}  // namespace
TEST(FileSystemTest, AtomicWriteReplacesWholeOrLeavesNothing) {
  const std::string folder = make_temporary_directory("graphed-atomic");
  const std::string path = join_path(folder, "state.json");
  EXPECT_EQ(write_file_atomically(path, "one"), 0);
  EXPECT_EQ(write_file_atomically(path, "two"), 0);
  std::string contents;
  ASSERT_EQ(read_file(path, contents), 0);
  EXPECT_EQ(contents, "two");
  EXPECT_EQ(list_files(folder), std::vector<std::string>{"state.json"}) << "no temporary file is left";
  std::string step;
  EXPECT_EQ(write_file_atomically(join_path(path, "below"), "x", &step), ENOTDIR);
  EXPECT_EQ(step, "writing " + path + "/below.tmp");
}

TEST(FileSystemTest, ParentFolder) {
  EXPECT_EQ(parent_folder("runs/a/iter_0000100"), "runs/a");
  EXPECT_EQ(parent_folder("runs/a/iter_0000100/"), "runs/a");
  EXPECT_EQ(parent_folder("run"), ".");
  EXPECT_EQ(parent_folder("/run"), "/");
}

}  // namespace graphed
