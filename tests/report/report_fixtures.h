// tests/report/report_fixtures.h — where the report tests' input files are (tests/report/fixtures/).
#pragma once

#include <string>

namespace graphed::report::test_fixtures {

inline const std::string kFixtures = std::string(GRAPHED_SOURCE_DIR) + "/tests/report/fixtures/";

}  // namespace graphed::report::test_fixtures
