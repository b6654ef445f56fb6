// train/output_paths.cpp — see train/output_paths.h.
#include "graphed/train/output_paths.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "graphed/train/checkpoint.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/logging.h"

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

/// The path with links and dots resolved, or as given where it does not exist.
std::string canonical(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

/// Refuses a run whose first save would make the folder's latest checkpoint an earlier one than it holds: a
/// --load of that folder would then resume the wrong run. A --load of one of that folder's own earlier iter_*
/// folders is a rollback on purpose (after a loss spike, say): it goes on, with a warning.
void refuse_a_rewind(const config::TrainConfig& train) {
  const auto latest = latest_saved_iteration(*train.save);
  if (!latest) return;
  const CheckpointInfo loaded = train.load ? read_checkpoint_info(*train.load) : CheckpointInfo{};
  const int64_t start = loaded.iteration;
  if (*latest <= start) return;
  if (train.load && canonical(parent_folder(loaded.folder)) == canonical(*train.save)) {
    log_warn("rolling back: --load " + *train.load + " is iteration " + std::to_string(start) +
             " of the --save folder '" + *train.save + "', whose latest is " + std::to_string(*latest) +
             "; from the next save on, the folder's latest checkpoint is this run's");
    return;
  }
  const std::string from = train.load ? " (from --load " + *train.load + ")" : " (no --load)";
  throw DataError("--save folder '" + *train.save + "' holds a later run's checkpoints (latest: iteration " +
                  std::to_string(*latest) + ") and this run starts at iteration " + std::to_string(start) + from +
                  ": its first save would make that folder's latest checkpoint go back; fix: pass --load " +
                  *train.save + " to go on from iteration " + std::to_string(*latest) +
                  ", or --save another folder (or remove that folder's checkpoints to start it over)");
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
  if (train.save) {
    check_save_folder(*train.save);
    refuse_a_rewind(train);
  }
  if (train.metrics_file) check_metrics_file(*train.metrics_file);
}

}  // namespace graphed::train
