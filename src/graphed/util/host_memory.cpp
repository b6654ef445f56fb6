// util/host_memory.cpp — see util/host_memory.h.
#include "graphed/util/host_memory.h"

#include <malloc.h>

#include <climits>
#include <cstdlib>

#include "graphed/util/file_system.h"

namespace graphed {

void keep_freed_host_memory() {
  mallopt(M_MMAP_MAX, 0);              // large blocks come from the heap, where freed ones are reused
  mallopt(M_TRIM_THRESHOLD, INT_MAX);  // and the heap is not given back while the run goes on
}

std::optional<int64_t> available_from_meminfo(const std::string& meminfo) {
  const std::size_t at = meminfo.find("MemAvailable:");
  if (at == std::string::npos) return std::nullopt;
  char* end = nullptr;
  const long long kilobytes = std::strtoll(meminfo.c_str() + at + 13, &end, 10);
  if (end == meminfo.c_str() + at + 13 || kilobytes < 0) return std::nullopt;
  return static_cast<int64_t>(kilobytes) * 1024;
}

std::optional<int64_t> host_available_memory_bytes() {
  std::string meminfo;
  if (read_file("/proc/meminfo", meminfo) != 0) return std::nullopt;
  return available_from_meminfo(meminfo);
}

}  // namespace graphed
