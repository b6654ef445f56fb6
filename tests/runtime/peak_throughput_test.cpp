// tests/runtime/peak_throughput_test.cpp — the CPU's peak for MFU is estimated from /proc/cpuinfo and
// says how; an unknown clock gives no peak (and no MFU column).
#include "graphed/runtime/peak_throughput.h"

#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

namespace graphed::runtime {
namespace {

TEST(PeakThroughputTest, CpuEstimateFromCoresClockAndVectorWidth) {
  const auto wide = runtime::cpu_peak_from_cpuinfo(
      "model name\t: AMD EPYC\ncpu MHz\t\t: 2500.000\nflags\t\t: fpu sse avx avx2 fma\n", 2);
  ASSERT_TRUE(wide);
  EXPECT_DOUBLE_EQ(wide->flops_per_second, 2 * 2.5e9 * 32);
  EXPECT_EQ(wide->basis, "CPU estimate: 2 cores x 2.5 GHz x 32 fp32 FLOP/cycle");
  const auto narrow = runtime::cpu_peak_from_cpuinfo("cpu MHz\t\t: 2000\nflags\t\t: fpu sse avx\n", 4);
  ASSERT_TRUE(narrow);
  EXPECT_DOUBLE_EQ(narrow->flops_per_second, 4 * 2e9 * 16);
  EXPECT_FALSE(runtime::cpu_peak_from_cpuinfo("flags\t\t: avx2 fma\n", 2));
}

TEST(PeakThroughputTest, TheCpuDeviceHasAnEstimateWhereCpuinfoListsAClock) {
  std::ifstream file("/proc/cpuinfo");
  const std::string cpuinfo((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto peak = runtime::peak_throughput(c10::Device(c10::kCPU), false);
  if (cpuinfo.find("cpu MHz") == std::string::npos) {
    EXPECT_FALSE(peak) << "no clock, no estimate";
  } else {
    ASSERT_TRUE(peak);
    EXPECT_GT(peak->flops_per_second, 0.0);
  }
}

}  // namespace
}  // namespace graphed::runtime
