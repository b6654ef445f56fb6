// tests/cli/check_config_command_test.cpp — `graphed check-config`: the normalized echo, the
// migration warnings, exit codes and the JSON form.
#include "graphed/cli/check_config_command.h"

#include <sstream>

#include <gtest/gtest.h>

namespace graphed::cli {
namespace {

struct CheckRun {
  int exit_code;
  std::string output;
};

CheckRun check(std::vector<std::string> arguments) {
  arguments.insert(arguments.begin(), "check-config");
  std::ostringstream out;
  const int code = run_check_config(parse_command_line(arguments), out);
  return {code, out.str()};
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CheckConfigCommandTest, DefaultsAreValid) {
  const CheckRun run = check({});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_TRUE(has(run.output, "configuration is valid")) << run.output;
  EXPECT_TRUE(has(run.output, "cuda_graph_impl")) << run.output;
  EXPECT_TRUE(has(run.output, "preset: (none)")) << run.output;
}

TEST(CheckConfigCommandTest, LegacyFlagsAreMigratedAndReported) {
  const CheckRun run = check({"--enable-cuda-graph", "--cuda-graph-scope", "full_iteration"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(has(run.output, "warning [M1]: --enable-cuda-graph is deprecated; using --cuda-graph-impl local"));
  EXPECT_TRUE(
      has(run.output, "warning [M3]: --cuda-graph-scope is deprecated; using --cuda-graph-modules full_iteration"));
  EXPECT_TRUE(has(run.output,
                  "warning [M5]: --cuda-graph-scope full_iteration is deprecated; using --cuda-graph-impl "
                  "full_iteration"));
  EXPECT_TRUE(has(run.output, "note [VA-6]")) << run.output;
  EXPECT_TRUE(has(run.output, "cuda_graph_impl ")) << run.output;
  EXPECT_TRUE(has(run.output, "= full_iteration  (normalized)")) << run.output;
}

TEST(CheckConfigCommandTest, InvalidConfigurationExitsOneWithEveryError) {
  const CheckRun run =
      check({"--cuda-graph-impl", "full_iteration", "--cuda-graph-modules", "attn", "--cuda-graph-warmup-steps", "0"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(
      has(run.output, "error [TC-6]: --cuda-graph-modules must be empty with --cuda-graph-impl full_iteration"));
  EXPECT_TRUE(has(run.output, "error [G1]: cuda_graph_warmup_steps must be >= 1, got 0"));
  EXPECT_TRUE(has(run.output, "configuration is invalid: 2 errors")) << run.output;
}

TEST(CheckConfigCommandTest, OriginsAreShown) {
  const CheckRun run = check({"--preset", "small", "--num-layers", "2"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_TRUE(has(run.output, "(command line)")) << run.output;
  EXPECT_TRUE(has(run.output, "(preset small)")) << run.output;
  EXPECT_TRUE(has(run.output, "= 8  (derived)")) << run.output;  // global batch = micro batch 8 x 1
}

TEST(CheckConfigCommandTest, JsonOutputIsMachineReadable) {
  const CheckRun run =
      check({"--json", "--cuda-graph-impl", "local", "--cuda-graph-modules", "attn,moe_router", "--num-experts", "4"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json parsed = nlohmann::json::parse(run.output);
  EXPECT_TRUE(parsed.at("valid").get<bool>());
  EXPECT_EQ(parsed.at("config").at("cuda_graph_impl"), "local");
  EXPECT_EQ(parsed.at("config").at("cuda_graph_modules"),
            nlohmann::json(std::vector<std::string>{"attn", "moe_router", "moe_preprocess"}));
  EXPECT_EQ(parsed.at("config").at("inference_cuda_graph_scope"), "layer");
  bool saw_tc8 = false;
  for (const auto& issue : parsed.at("issues")) saw_tc8 |= issue.at("rule") == "TC-8";
  EXPECT_TRUE(saw_tc8);
  EXPECT_EQ(parsed.at("origins").at("cuda_graph_impl"), "command line");
}

}  // namespace
}  // namespace graphed::cli
