// tests/cli/run_setup_test.cpp — what a run gets before any work: --load's checkpoint settings with
// explicit flags overriding them (each listed), a preset warmup fitted to a short run, the refusal of a
// multi-process launch, and check-config's "can this machine run it" line.
#include "graphed/cli/run_setup.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "graphed/cli/check_config_command.h"
#include "graphed/cli/train_command.h"
#include "graphed/util/build_info.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::cli {
namespace {

/// A folder with a checkpoint of a 4-iteration CPU run: --lr 0.002, --hidden-dropout 0, --seed 7.
std::string saved_run() {
  static const std::string folder = [] {
    const std::string path = make_temporary_directory("graphed-run-setup");
    std::ostringstream out;
    run_train(parse_command_line({"train",
                                  "--mock-data",
                                  "--device",
                                  "cpu",
                                  "--num-layers",
                                  "1",
                                  "--hidden-size",
                                  "32",
                                  "--num-attention-heads",
                                  "2",
                                  "--seq-length",
                                  "16",
                                  "--vocab-size",
                                  "64",
                                  "--train-iters",
                                  "4",
                                  "--lr",
                                  "0.002",
                                  "--hidden-dropout",
                                  "0",
                                  "--seed",
                                  "7",
                                  "--eval-iters",
                                  "0",
                                  "--save",
                                  path}),
              out);
    return path;
  }();
  return folder;
}

TEST(RunSetupTest, LoadTakesTheCheckpointsSettingsAndListsEachOverride) {
  const RunSettings run =
      settings_for_run(parse_command_line({"train", "--load", saved_run(), "--train-iters", "8", "--lr", "0.001"}));
  EXPECT_EQ(run.settings.model.hidden_size, 32);
  EXPECT_EQ(run.settings.model.hidden_dropout, 0.0);
  EXPECT_EQ(run.settings.train.seed, 7);
  EXPECT_EQ(run.settings.train.train_iters, 8);
  EXPECT_EQ(run.settings.train.lr, 0.001);
  EXPECT_FALSE(run.settings.train.lr_decay_iters) << "derived from --train-iters again";
  ASSERT_EQ(run.notes.size(), 2u);
  EXPECT_EQ(run.notes[0], "model and training settings come from the checkpoint " + saved_run() +
                              "/iter_0000004 (iteration 4); flags and --config override them");
  EXPECT_EQ(run.notes[1], "overriding the checkpoint: --train-iters 8 (checkpoint: 4), --lr 0.001 (checkpoint: 0.002)");
}

TEST(RunSetupTest, CheckpointSettingsOutrankAPreset) {
  const RunSettings run = settings_for_run(parse_command_line({"train", "--preset", "tiny", "--load", saved_run()}));
  EXPECT_EQ(run.settings.model.hidden_size, 32);  // tiny has 128
  EXPECT_EQ(run.origins.at("hidden_size"), "checkpoint " + saved_run() + "/iter_0000004");
  EXPECT_EQ(run.notes.size(), 1u) << "a preset does not override the checkpoint";
}

TEST(RunSetupTest, ACompleteRunSaysHowToGoOn) {
  std::ostringstream out;
  EXPECT_EQ(run_train(parse_command_line({"train", "--load", saved_run(), "--device", "cpu"}), out), 0);
  EXPECT_NE(out.str().find("nothing to train: the checkpoint is at iteration 4 and --train-iters is 4; to go on, pass "
                           "a larger --train-iters (e.g. --train-iters 8)"),
            std::string::npos)
      << out.str();
}

TEST(RunSetupTest, TrainerJsonAndCheckConfigOutputFeedBackAsConfig) {
  const std::string trainer_json = saved_run() + "/iter_0000004/trainer.json";
  const CommandLine from_checkpoint = parse_command_line({"train", "--config", trainer_json});
  EXPECT_EQ(from_checkpoint.settings.model.hidden_size, 32);
  EXPECT_EQ(from_checkpoint.settings.train.lr, 0.002);
  EXPECT_FALSE(from_checkpoint.settings.train.save) << "a new run must not write into the old run's folder";
  EXPECT_EQ(from_checkpoint.settings.train.device, "auto");
  EXPECT_FALSE(from_checkpoint.settings.train.lr_decay_iters) << "derived from --train-iters again";
  EXPECT_FALSE(from_checkpoint.settings.model.num_query_groups) << "the head count, without grouped-query attention";
  EXPECT_TRUE(from_checkpoint.origins.count("num_query_groups") == 0);

  std::ostringstream json_output;
  run_check_config(
      parse_command_line({"check-config", "--preset", "moe-small", "--cuda-graph-impl", "local", "--json"}),
      json_output);
  const std::string path = make_temporary_directory("graphed-check-config") + "/out.json";
  std::ofstream(path) << json_output.str();
  const CommandLine fed_back = parse_command_line({"check-config", "--config", path});
  std::ostringstream again;
  EXPECT_EQ(run_check_config(fed_back, again), 0) << again.str();
  EXPECT_EQ(fed_back.settings.model.num_experts, 8);
  EXPECT_EQ(fed_back.settings.cuda_graph.impl, "local");
}

TEST(RunSetupTest, APresetWarmupLongerThanTheRunIsScaledDownWithANote) {
  const RunSettings run = settings_for_run(parse_command_line({"train", "--preset", "tiny", "--train-iters", "5"}));
  EXPECT_EQ(run.settings.train.lr_warmup_iters, 0);
  EXPECT_EQ(run.origins.at("lr_warmup_iters"), "preset tiny, fitted to the run");
  ASSERT_EQ(run.notes.size(), 1u);
  EXPECT_EQ(run.notes[0],
            "preset tiny's --lr-warmup-iters 100 does not fit --train-iters 5: warming up for 0 "
            "iterations instead (a tenth of the run; pass --lr-warmup-iters to choose)");
  // A warmup the user gave is theirs: rule TR-4 refuses it, naming the rule once.
  try {
    std::ostringstream out;
    resolve_for_run(parse_command_line({"train", "--preset", "tiny", "--train-iters", "5", "--lr-warmup-iters", "100"}),
                    out);
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_STREQ(error.what(),
                 "--lr-warmup-iters 100 must be between 0 and --lr-decay-iters 5 (unset = --train-iters); "
                 "fix: shorten the warmup or lengthen the decay [TR-4]");
  }
}

TEST(RunSetupTest, AMultiProcessLaunchIsRefused) {
  ::setenv("WORLD_SIZE", "2", 1);
  std::string message;
  try {
    refuse_multi_process_launch("bench");
  } catch (const ConfigError& error) {
    message = error.what();
  }
  ::unsetenv("WORLD_SIZE");
  EXPECT_EQ(message,
            "WORLD_SIZE=2 asks for 2 processes (torchrun or another launcher), but `graphed bench` runs as "
            "one process: each would do the same work alone; fix: run it without a launcher (unset "
            "WORLD_SIZE); `graphed train` is the command that runs on several");
  ::setenv("WORLD_SIZE", "1", 1);
  EXPECT_NO_THROW(refuse_multi_process_launch("bench"));
  ::unsetenv("WORLD_SIZE");
}

TEST(RunSetupTest, CheckConfigSaysWhetherThisMachineCanRunIt) {
  std::ostringstream eager, graphed;
  run_check_config(parse_command_line({"check-config", "--device", "cpu"}), eager);
  EXPECT_NE(eager.str().find("this build and machine can run it: "), std::string::npos) << eager.str();
  EXPECT_NE(eager.str().find("--cuda-graph-impl none on the CPU"), std::string::npos) << eager.str();
  run_check_config(parse_command_line({"check-config", "--cuda-graph-impl", "local", "--device", "cpu"}), graphed);
  EXPECT_NE(graphed.str().find("this build and machine cannot run it: --cuda-graph-impl local needs CUDA graphs, but "),
            std::string::npos)
      << graphed.str();
}

TEST(RunSetupTest, Fp8WithoutFp8TensorCoresIsRefusedNamingTheDevice) {
  std::ostringstream checked;
  run_check_config(parse_command_line({"check-config", "--device", "cpu", "--bf16", "--fp8-format", "hybrid"}),
                   checked);
  EXPECT_NE(checked.str().find("this build and machine cannot run it: --fp8-format hybrid needs a GPU with FP8 "
                               "tensor cores, but "),
            std::string::npos)
      << checked.str();
  std::ostringstream out;
  try {
    run_train(parse_command_line({"train", "--mock-data", "--device", "cpu", "--bf16", "--fp8-format", "e4m3",
                                  "--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2",
                                  "--seq-length", "16", "--vocab-size", "64", "--train-iters", "1"}),
              out);
    ADD_FAILURE() << "FP8 on the CPU was not refused";
  } catch (const ConfigError& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("--fp8-format e4m3 needs a GPU with FP8 tensor cores, but ", 0), 0u) << message;
    EXPECT_NE(message.find("cpu"), std::string::npos) << "the device is not named: " << message;
    EXPECT_NE(message.find("; fix: train on an H100 or H200"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace graphed::cli
