// tests/util/host_memory_test.cpp — MemAvailable is read from /proc/meminfo's text.
#include "graphed/util/host_memory.h"

#include <gtest/gtest.h>

namespace graphed {
namespace {

TEST(HostMemoryTest, ReadsMemAvailableInBytes) {
  EXPECT_EQ(available_from_meminfo("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   23456789 kB\n"),
            23456789LL * 1024);
  EXPECT_FALSE(available_from_meminfo("MemTotal:       24000000 kB\n"));
  EXPECT_FALSE(available_from_meminfo("MemAvailable: none\n"));
  EXPECT_TRUE(host_available_memory_bytes().value_or(0) > 0) << "this machine's /proc/meminfo";
}

}  // namespace
}  // namespace graphed
