// util/file_system.h — the few file-system operations graphed needs, on POSIX calls. We do not use
// std::filesystem: the pip wheel's LibTorch exports std::filesystem symbols of an older libstdc++,
// and create_directories/remove_all crashed (segfault) in a binary linked against it (seen on the
// GPU machine with torch 2.11 and g++ 13). Functions return 0 or an errno value; callers word the
// user-facing message.
#pragma once

#include <string>
#include <vector>

namespace graphed {

/// "a/b" from "a" and "b" (no doubled slash).
std::string join_path(const std::string& directory, const std::string& name);
bool path_exists(const std::string& path);
bool is_directory(const std::string& path);
/// Size in bytes, or -1 when the file cannot be read.
long long file_size(const std::string& path);
/// mkdir -p. Returns 0 or errno.
int create_directories(const std::string& path);
/// rm -rf (no error when the path does not exist). Returns 0 or errno.
int remove_all(const std::string& path);
/// rename(2). Returns 0 or errno.
int rename_path(const std::string& from, const std::string& to);
/// fsync of a file or folder, so a rename that follows is durable. Returns 0 or errno.
int fsync_path(const std::string& path);
/// Writes contents to path.tmp, fsyncs it and renames it to path, so that path holds either its old or
/// its new contents, never a part. On failure path.tmp is removed; returns the errno and, in
/// failed_step, what failed ("writing P.tmp", "syncing P.tmp", "renaming P.tmp"). Returns 0 on success.
int write_file_atomically(const std::string& path, const std::string& contents, std::string* failed_step = nullptr);
/// Reads the whole file into contents. Returns 0 or errno (ENOENT, EACCES, EISDIR, ...).
int read_file(const std::string& path, std::string& contents);
/// Names (not paths) of the regular files in a folder, sorted; empty if it cannot be read.
std::vector<std::string> list_files(const std::string& directory);
/// Names (not paths) of the folders in a folder (not "." or ".."), sorted; empty if it cannot be read.
std::vector<std::string> list_directories(const std::string& directory);
/// The extension with its dot (".bin"), or "" when the file name has none.
std::string extension_of(const std::string& path);
/// The folder holding `path` ("runs/a" for "runs/a/iter_0000100/" and "runs/a/iter_0000100"; "." for "run").
std::string parent_folder(const std::string& path);
/// A new, empty folder under $TMPDIR or /tmp named prefix-XXXXXX; "" on failure.
std::string make_temporary_directory(const std::string& prefix);

}  // namespace graphed
