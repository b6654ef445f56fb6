// tests/runtime/peak_throughput_test.cpp — the CPU's peak for MFU is estimated from /proc/cpuinfo and
// says how; an unknown clock gives no peak (and no MFU column).
#include "graphed/runtime/peak_throughput.h"

#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

namespace graphed::runtime {
namespace {

/// Two logical CPUs of one core each, as this workplace's machines list them.
std::string two_cores(const std::string& clock_and_flags) {
  std::string text;
  for (const char* core : {"0", "1"}) {
    text += std::string("processor\t: ") + core + "\nmodel name\t: AMD EPYC\n" + clock_and_flags +
            "physical id\t: 0\ncore id\t\t: " + core + "\n\n";
  }
  return text;
}

TEST(PeakThroughputTest, CpuEstimateFromCoresClockAndVectorWidth) {
  const auto wide = cpu_peak({two_cores("cpu MHz\t\t: 2500.000\nflags\t\t: fpu sse avx avx2 fma\n"), 2, ""});
  ASSERT_TRUE(wide);
  EXPECT_DOUBLE_EQ(wide->flops_per_second, 2 * 2.5e9 * 32);
  EXPECT_EQ(wide->basis, "CPU estimate: 2 cores x 2.5 GHz x 32 fp32 FLOP/cycle");
  const auto narrow = cpu_peak({"cpu MHz\t\t: 2000\nflags\t\t: fpu sse avx\n", 4, ""});
  ASSERT_TRUE(narrow);
  EXPECT_DOUBLE_EQ(narrow->flops_per_second, 4 * 2e9 * 16);
  EXPECT_FALSE(cpu_peak({"flags\t\t: avx2 fma\n", 2, ""}));
}

/// The EPYC that showed 108% MFU is a Zen 5 (family 26) with AVX-512: two 512-bit FMA pipes make 64 fp32 FLOP a
/// cycle, not 32. A Zen 4 (family 25) runs AVX-512 on 256-bit pipes: 32.
TEST(PeakThroughputTest, AvxFiveTwelveCountsItsWidth) {
  const std::string flags = "flags\t\t: fpu sse avx avx2 fma avx512f avx512bw\n";
  const auto zen5 =
      cpu_peak({two_cores("vendor_id\t: AuthenticAMD\ncpu family\t: 26\ncpu MHz\t\t: 2600.000\n" + flags), 2, ""});
  ASSERT_TRUE(zen5);
  EXPECT_DOUBLE_EQ(zen5->flops_per_second, 2 * 2.6e9 * 64);
  EXPECT_EQ(zen5->basis, "CPU estimate: 2 cores x 2.6 GHz x 64 fp32 FLOP/cycle");
  const auto zen4 =
      cpu_peak({two_cores("vendor_id\t: AuthenticAMD\ncpu family\t: 25\ncpu MHz\t\t: 2600.000\n" + flags), 2, ""});
  EXPECT_DOUBLE_EQ(zen4->flops_per_second, 2 * 2.6e9 * 32);
  const auto intel =
      cpu_peak({two_cores("vendor_id\t: GenuineIntel\ncpu family\t: 6\ncpu MHz\t\t: 2600.000\n" + flags), 2, ""});
  EXPECT_DOUBLE_EQ(intel->flops_per_second, 2 * 2.6e9 * 64);
}

/// The clock is the highest known (cpufreq's maximum, or the model name's, over the current "cpu MHz"); the cores
/// are physical (hyper-threads share them) and at most those this process may use.
TEST(PeakThroughputTest, TheHighestClockAndThePhysicalCoresThisProcessMayUse) {
  const std::string flags = "flags\t\t: avx2 fma\n";
  EXPECT_DOUBLE_EQ(cpu_peak({two_cores("cpu MHz\t\t: 1500.000\n" + flags), 2, "3700000\n"})->flops_per_second,
                   2 * 3.7e9 * 32);
  const std::string intel = "model name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\ncpu MHz\t\t: 1000.0\n" + flags;
  EXPECT_DOUBLE_EQ(cpu_peak({intel, 1, ""})->flops_per_second, 1 * 2.5e9 * 32);
  std::string smt;  // four logical CPUs on two cores
  for (const char* core : {"0", "0", "1", "1"}) {
    smt += "cpu MHz\t\t: 2000\n" + flags + "physical id\t: 0\ncore id\t\t: " + core + "\n\n";
  }
  EXPECT_DOUBLE_EQ(cpu_peak({smt, 4, ""})->flops_per_second, 2 * 2e9 * 32);
  EXPECT_DOUBLE_EQ(cpu_peak({smt, 1, ""})->flops_per_second, 1 * 2e9 * 32);
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
