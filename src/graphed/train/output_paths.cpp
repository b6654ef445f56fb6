// train/output_paths.cpp — see train/output_paths.h.
#include "graphed/train/output_paths.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::train {
namespace {

[[noreturn]] void fail(const std::string& flag, const std::string& path, const std::string& reason,
                       const std::string& fix) {
  throw DataError("cannot write " + flag + " '" + path + "': " + reason + "; fix: " + fix);
}

void check_save_folder(const std::string& folder) {
  const std::string fix = "pass --save a folder you can write to (it is created if missing)";
  if (path_exists(folder) && !is_directory(folder)) fail("--save", folder, "it is a file, not a folder", fix);
  if (const int error = create_directories(folder)) fail("--save", folder, std::strerror(error), fix);
  const std::string probe = join_path(folder, ".graphed-write-check-" + std::to_string(::getpid()));
  {
    std::ofstream file(probe);
    file << "probe\n";
    if (!file) fail("--save", folder, std::strerror(errno != 0 ? errno : EACCES), fix);
  }
  remove_all(probe);
}

void check_metrics_file(const std::string& path) {
  const std::string fix = "pass --metrics-file a path in a writable folder (missing folders are created)";
  if (is_directory(path)) fail("--metrics-file", path, "it is a folder, not a file", fix);
  const std::size_t slash = path.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "" : path.substr(0, slash);
  if (!folder.empty() && !is_directory(folder)) {
    if (const int error = create_directories(folder)) fail("--metrics-file", path, std::strerror(error), fix);
  }
  std::ofstream file(path, std::ios::app);
  if (!file) fail("--metrics-file", path, std::strerror(errno != 0 ? errno : EACCES), fix);
}

}  // namespace

void check_output_paths(const config::TrainConfig& train) {
  if (train.save) check_save_folder(*train.save);
  if (train.metrics_file) check_metrics_file(*train.metrics_file);
}

}  // namespace graphed::train
