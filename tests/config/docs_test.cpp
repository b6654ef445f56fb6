// tests/config/docs_test.cpp — docs/configuration.md lists every flag and every rule id, so the
// table users read cannot drift from the code.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "graphed/config/settings.h"
#include "graphed/config/validation.h"

namespace graphed::config {
namespace {

std::string read_docs() {
  std::ifstream file(std::string(GRAPHED_SOURCE_DIR) + "/docs/configuration.md");
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(DocsTest, ConfigurationDocListsEveryFlag) {
  const std::string docs = read_docs();
  ASSERT_FALSE(docs.empty()) << "docs/configuration.md is missing";
  for (const auto& spec : setting_specs()) {
    EXPECT_NE(docs.find("`" + spec.flag() + "`"), std::string::npos) << spec.flag() << " is not documented";
  }
  for (const auto& alias : setting_aliases()) {
    EXPECT_NE(docs.find("`" + alias.flag + "`"), std::string::npos) << alias.flag << " is not documented";
  }
}

TEST(DocsTest, ConfigurationDocListsEveryRule) {
  const std::string docs = read_docs();
  for (const auto& rule : all_rules()) {
    EXPECT_NE(docs.find("| " + rule.id + " |"), std::string::npos) << rule.id << " is not documented";
  }
}

}  // namespace
}  // namespace graphed::config
