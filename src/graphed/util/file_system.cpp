// util/file_system.cpp — see util/file_system.h.
#include "graphed/util/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace graphed {

std::string join_path(const std::string& directory, const std::string& name) {
  if (directory.empty()) return name;
  return directory.back() == '/' ? directory + name : directory + "/" + name;
}

bool path_exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

bool is_directory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

long long file_size(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 ? static_cast<long long>(info.st_size) : -1;
}

int create_directories(const std::string& path) {
  if (path.empty() || is_directory(path)) return 0;
  const auto slash = path.find_last_of('/', path.size() > 1 ? path.size() - 2 : 0);
  if (slash != std::string::npos && slash > 0) {
    if (const int error = create_directories(path.substr(0, slash))) return error;
  }
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return errno;
  return is_directory(path) ? 0 : ENOTDIR;
}

namespace {
int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path) == 0 ? 0 : errno; }
}  // namespace

int remove_all(const std::string& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) return errno == ENOENT ? 0 : errno;
  if (!S_ISDIR(info.st_mode)) return ::remove(path.c_str()) == 0 ? 0 : errno;
  return ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int rename_path(const std::string& from, const std::string& to) {
  return ::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

int fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return errno;
  const int result = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return result;
}

int write_file_atomically(const std::string& path, const std::string& contents, std::string* failed_step) {
  const std::string temporary = path + ".tmp";
  const auto fail = [&](int error, const char* step) {
    remove_all(temporary);
    if (failed_step != nullptr) *failed_step = std::string(step) + " " + temporary;
    return error;
  };
  FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) return fail(errno, "writing");
  const bool written = std::fwrite(contents.data(), 1, contents.size(), file) == contents.size();
  const int write_error = written ? 0 : (errno != 0 ? errno : EIO);
  if (std::fclose(file) != 0 || !written)
    return fail(write_error != 0 ? write_error : (errno != 0 ? errno : EIO), "writing");
  if (const int error = fsync_path(temporary)) return fail(error, "syncing");
  if (const int error = rename_path(temporary, path)) return fail(error, "renaming");
  return 0;
}

int read_file(const std::string& path, std::string& contents) {
  if (is_directory(path)) return EISDIR;
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return errno;
  contents.clear();
  char buffer[1 << 16];
  std::size_t count;
  while ((count = std::fread(buffer, 1, sizeof(buffer), file)) > 0) contents.append(buffer, count);
  const int error = std::ferror(file) ? EIO : 0;
  std::fclose(file);
  return error;
}

namespace {
/// Names in a folder whose stat mode satisfies `keep`, sorted.
template <typename Keep>
std::vector<std::string> list_entries(const std::string& directory, Keep keep) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat info;
    if (::stat(join_path(directory, name).c_str(), &info) == 0 && keep(info.st_mode)) names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}
}  // namespace

std::vector<std::string> list_files(const std::string& directory) {
  return list_entries(directory, [](mode_t mode) { return S_ISREG(mode); });
}

std::vector<std::string> list_directories(const std::string& directory) {
  return list_entries(directory, [](mode_t mode) { return S_ISDIR(mode); });
}

std::string extension_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == slash + 1) return "";
  return path.substr(dot);
}

std::string parent_folder(const std::string& path) {
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const auto slash = trimmed.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : trimmed.substr(0, slash);
}

std::string make_temporary_directory(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = join_path(base != nullptr && *base != '\0' ? base : "/tmp", prefix + "-XXXXXX");
  return ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
}

}  // namespace graphed
