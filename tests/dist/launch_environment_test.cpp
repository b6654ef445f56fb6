// tests/dist/launch_environment_test.cpp — the launch variables torchrun sets, read through a lookup:
// one process when WORLD_SIZE is unset, every field of a full launch, and a message naming the
// variable and its fix for each missing or malformed one.
#include "graphed/dist/launch_environment.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "graphed/util/error.h"

namespace graphed::dist {
namespace {

using Variables = std::map<std::string, std::string>;

LaunchEnvironment parse(const Variables& variables) {
  return parse_launch_environment([&](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  });
}

/// The DistributedError parse throws, or "(no error)".
std::string parse_error(const Variables& variables) {
  try {
    parse(variables);
  } catch (const DistributedError& error) {
    return error.what();
  }
  return "(no error)";
}

const Variables kTwoRanks = {{"WORLD_SIZE", "2"},          {"RANK", "1"},
                             {"LOCAL_RANK", "1"},          {"LOCAL_WORLD_SIZE", "2"},
                             {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};

Variables without(Variables variables, const std::string& name) {
  variables.erase(name);
  return variables;
}

Variables with(Variables variables, const std::string& name, const std::string& value) {
  variables[name] = value;
  return variables;
}

TEST(LaunchEnvironmentTest, NoWorldSizeIsOneProcess) {
  const LaunchEnvironment environment = parse({});
  EXPECT_FALSE(environment.is_distributed());
  EXPECT_EQ(environment.world_size, 1);
  EXPECT_EQ(environment.rank, 0);
  EXPECT_EQ(environment.local_rank, 0);
  EXPECT_TRUE(environment.master_address.empty());
  EXPECT_FALSE(environment.agent_store);
}

TEST(LaunchEnvironmentTest, WorldSizeOneReadsNothingElse) {
  // RANK is out of range and MASTER_ADDR missing: neither matters for one process.
  const LaunchEnvironment environment = parse({{"WORLD_SIZE", "1"}, {"RANK", "7"}});
  EXPECT_FALSE(environment.is_distributed());
  EXPECT_EQ(environment.rank, 0);
}

TEST(LaunchEnvironmentTest, AFullLaunchFillsEveryField) {
  const LaunchEnvironment environment = parse(kTwoRanks);
  EXPECT_TRUE(environment.is_distributed());
  EXPECT_EQ(environment.world_size, 2);
  EXPECT_EQ(environment.rank, 1);
  EXPECT_EQ(environment.local_rank, 1);
  EXPECT_EQ(environment.local_world_size, 2);
  EXPECT_EQ(environment.master_address, "127.0.0.1");
  EXPECT_EQ(environment.master_port, 29500);
  EXPECT_FALSE(environment.agent_store);
  EXPECT_EQ(environment.restart_count, 0);
  EXPECT_EQ(environment.describe(), "rank 1 of 2");
}

TEST(LaunchEnvironmentTest, LocalRankDefaultsToRankAndLocalWorldToWorld) {
  const LaunchEnvironment environment = parse(without(without(kTwoRanks, "LOCAL_RANK"), "LOCAL_WORLD_SIZE"));
  EXPECT_EQ(environment.local_rank, 1);
  EXPECT_EQ(environment.local_world_size, 2);
}

TEST(LaunchEnvironmentTest, TheAgentStoreFlagAndRestartCountAreRead) {
  const LaunchEnvironment environment =
      parse(with(with(kTwoRanks, "TORCHELASTIC_USE_AGENT_STORE", "True"), "TORCHELASTIC_RESTART_COUNT", "3"));
  EXPECT_TRUE(environment.agent_store);
  EXPECT_EQ(environment.restart_count, 3);
  // torchrun writes "True" or "False"; anything but "True" means rank 0 hosts the store.
  EXPECT_FALSE(parse(with(kTwoRanks, "TORCHELASTIC_USE_AGENT_STORE", "False")).agent_store);
}

TEST(LaunchEnvironmentTest, AMissingRankNamesItAndTheFix) {
  const std::string message = parse_error(without(kTwoRanks, "RANK"));
  EXPECT_EQ(message,
            "WORLD_SIZE=2 asks for several processes, but RANK is not set; fix: launch with torchrun (torchrun "
            "--nproc-per-node 2 --no-python graphed train ...), which sets RANK, LOCAL_RANK, MASTER_ADDR and "
            "MASTER_PORT, or set RANK in every process");
}

TEST(LaunchEnvironmentTest, AMissingMasterAddressNamesItAndTheFix) {
  for (const std::string& value : {std::string("(unset)"), std::string("")}) {
    const Variables variables =
        value == "(unset)" ? without(kTwoRanks, "MASTER_ADDR") : with(kTwoRanks, "MASTER_ADDR", value);
    const std::string message = parse_error(variables);
    EXPECT_NE(message.find("MASTER_ADDR"), std::string::npos) << message;
    EXPECT_NE(message.find("is not set; fix: "), std::string::npos) << message;
    EXPECT_NE(message.find("127.0.0.1"), std::string::npos) << message;
  }
}

TEST(LaunchEnvironmentTest, AMissingMasterPortNamesItAndTheFix) {
  const std::string message = parse_error(without(kTwoRanks, "MASTER_PORT"));
  EXPECT_EQ(message.rfind("WORLD_SIZE=2 asks for several processes, but MASTER_PORT is not set; fix: ", 0), 0u)
      << message;
  EXPECT_NE(message.find("or set MASTER_PORT in every process"), std::string::npos) << message;
}

TEST(LaunchEnvironmentTest, ARankOutOfRangeIsRefused) {
  EXPECT_EQ(parse_error(with(kTwoRanks, "RANK", "2")),
            "RANK='2' is not an integer between 0 and 1; fix: launch with torchrun, which sets it, or set it to a "
            "value in that range");
  EXPECT_NE(parse_error(with(kTwoRanks, "RANK", "-1")).find("RANK='-1' is not an integer between 0 and 1; fix: "),
            std::string::npos);
  EXPECT_NE(parse_error(with(kTwoRanks, "LOCAL_RANK", "5")).find("LOCAL_RANK='5' is not an integer between 0 and 1"),
            std::string::npos);
  EXPECT_NE(parse_error(with(kTwoRanks, "MASTER_PORT", "70000"))
                .find("MASTER_PORT='70000' is not an integer "
                      "between 1 and 65535; fix: "),
            std::string::npos);
}

TEST(LaunchEnvironmentTest, MalformedIntegersAreRefusedWithTheirValue) {
  const std::vector<std::pair<std::string, std::string>> malformed = {
      {"WORLD_SIZE", "two"}, {"WORLD_SIZE", "0"},     {"RANK", "1x"},
      {"RANK", ""},          {"MASTER_PORT", "port"}, {"TORCHELASTIC_RESTART_COUNT", "1.5"}};
  for (const auto& [name, value] : malformed) {
    const std::string message = parse_error(with(kTwoRanks, name, value));
    EXPECT_EQ(message.rfind(name + "='" + value + "' is not an integer between ", 0), 0u) << name << ": " << message;
    EXPECT_NE(message.find("; fix: "), std::string::npos) << message;
  }
  EXPECT_EQ(parse_error(with(kTwoRanks, "WORLD_SIZE", "99999999999999999999")).rfind("WORLD_SIZE='9", 0), 0u);
}

}  // namespace
}  // namespace graphed::dist
