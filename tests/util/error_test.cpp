// tests/util/error_test.cpp — the error family and the check macros.
#include "graphed/util/error.h"

#include <gtest/gtest.h>

namespace graphed {
namespace {

TEST(ErrorTest, CheckThrowsTheNamedTypeWithTheJoinedMessage) {
  try {
    GRAPHED_CHECK(1 + 1 == 3, DataError, "token file 'a.bin' has ", 7, " bytes; fix: regenerate it");
    FAIL() << "GRAPHED_CHECK did not throw";
  } catch (const DataError& error) {
    EXPECT_STREQ(error.what(), "token file 'a.bin' has 7 bytes; fix: regenerate it");
  }
  EXPECT_NO_THROW(GRAPHED_CHECK(true, DataError, "never"));
}

TEST(ErrorTest, CaptureErrorJoinsCauseAndFix) {
  const CaptureError error("device sync inside capture (aten::item)", "drop mlp from --cuda-graph-modules");
  EXPECT_STREQ(error.what(), "device sync inside capture (aten::item); fix: drop mlp from --cuda-graph-modules");
  EXPECT_EQ(error.cause(), "device sync inside capture (aten::item)");
  EXPECT_EQ(error.fix(), "drop mlp from --cuda-graph-modules");
}

TEST(ErrorTest, InternalAssertAsksForAReport) {
  try {
    GRAPHED_INTERNAL_ASSERT(false, "runner count ", 2);
    FAIL() << "GRAPHED_INTERNAL_ASSERT did not throw";
  } catch (const std::logic_error& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("internal error, please report"), std::string::npos) << text;
    EXPECT_NE(text.find("runner count 2"), std::string::npos) << text;
  }
}

TEST(ErrorTest, ConfigErrorKeepsEveryDetail) {
  const ConfigError error("invalid configuration (2 errors)", {"error [TC-9]: a", "error [G1]: b"});
  ASSERT_EQ(error.details().size(), 2u);
  EXPECT_EQ(error.details()[1], "error [G1]: b");
}

}  // namespace
}  // namespace graphed
