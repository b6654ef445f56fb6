// tests/train/checkpoint_test.cpp — checkpoint save/load, bitwise resume (with dropout, so the RNG
// state matters), and the bad-checkpoint errors: corrupt, mismatched, missing, unwritable (and no
// partial checkpoint left behind). Edited and corrupted files: checkpoint_load_test.cpp.
#include "graphed/train/checkpoint.h"

#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>

#include <gtest/gtest.h>

#include "train/checkpoint_for_test.h"

#include "graphed/train/trainer.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::train {
namespace {

using CheckpointTest = graphed::testing::CheckpointFixture;
using graphed::testing::small_checkpoint_settings;

/// Rewrites a saved checkpoint's trainer.json "config" through `edit`: what an older graphed saved.
void edit_saved_config(const std::string& checkpoint, const std::function<void(nlohmann::json&)>& edit) {
  const std::string path = checkpoint + "/trainer.json";
  std::ifstream in(path);
  nlohmann::json trainer_json = nlohmann::json::parse(in);
  in.close();
  edit(trainer_json["config"]);
  std::ofstream(path) << trainer_json.dump();
}

TEST_F(CheckpointTest, ResumeContinuesBitwiseWithTheSameLosses) {
  nlohmann::json settings = small_checkpoint_settings();
  settings["save"] = in_dir("run");
  settings["save_interval"] = 3;
  Trainer uninterrupted = make_trainer(settings);
  std::vector<double> expected;
  for (int64_t it = 0; it < 6; ++it) {
    expected.push_back(uninterrupted.train_step(it).loss.item<double>());
    if (it == 2) uninterrupted.save(3);
  }
  EXPECT_TRUE(path_exists(in_dir("run/iter_0000003/model.safetensors")));
  std::ifstream latest(in_dir("run/latest_checkpointed_iteration.txt"));
  int64_t latest_iteration = 0;
  latest >> latest_iteration;
  EXPECT_EQ(latest_iteration, 3);

  at::manual_seed(12345);            // resuming must not depend on the RNG state before the load
  settings["load"] = in_dir("run");  // as graphed train --load passes it (a save there must not go back)
  Trainer resumed = make_trainer(settings);
  resumed.load(in_dir("run"));
  ASSERT_EQ(resumed.start_iteration(), 3);
  for (int64_t it = 3; it < 6; ++it) {
    EXPECT_EQ(resumed.train_step(it).loss.item<double>(), expected[static_cast<std::size_t>(it)]) << "iteration " << it;
  }
  const auto a = uninterrupted.model()->parameters();
  const auto b = resumed.model()->parameters();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << "parameter " << i;
}

TEST_F(CheckpointTest, MismatchedModelIsNamed) {
  nlohmann::json settings = small_checkpoint_settings();
  settings["save"] = in_dir("run");
  Trainer trainer = make_trainer(settings);
  const std::string saved = trainer.save(1);
  settings["hidden_size"] = 64;
  settings["load"] = saved;
  Trainer other = make_trainer(settings);
  EXPECT_EQ(error_of([&] { other.load(saved); }),
            "checkpoint '" + saved +
                "' was saved by a different model: --hidden-size is 32 there, 64 here; "
                "--ffn-hidden-size is 128 there, 256 here; fix: pass "
                "the model flags of the run that saved it (its trainer.json lists them)");
}

TEST_F(CheckpointTest, HuggingFaceArchitectureSettingsMustMatchToo) {
  nlohmann::json settings = small_checkpoint_settings();
  settings["save"] = in_dir("run");
  settings["qk_layernorm"] = true;
  settings["kv_channels"] = 8;
  Trainer trainer = make_trainer(settings);
  const std::string saved = trainer.save(1);
  settings.erase("qk_layernorm");
  settings.erase("kv_channels");
  settings["add_qkv_bias"] = true;
  settings["add_bias_linear"] = false;
  settings["load"] = saved;  // as graphed train --load passes it (a save there must not go back)
  Trainer other = make_trainer(settings);
  EXPECT_EQ(error_of([&] { other.load(saved); }),
            "checkpoint '" + saved +
                "' was saved by a different model: --kv-channels is 8 there, null here; "
                "--qk-layernorm is true there, false here; --add-bias-linear is true there, false here; --add-qkv-bias "
                "is false there, true here; fix: pass the model flags of the run that saved it (its trainer.json lists "
                "them)");
}

TEST_F(CheckpointTest, OlderCheckpointsWithoutTheNewKeysStillLoad) {
  nlohmann::json settings = small_checkpoint_settings();
  settings["save"] = in_dir("run");
  Trainer trainer = make_trainer(settings);
  const std::string saved = trainer.save(1);
  edit_saved_config(saved, [](nlohmann::json& config) {
    for (const char* key : {"kv_channels", "add_qkv_bias", "qk_layernorm"}) {
      ASSERT_TRUE(config.contains(key));
      config.erase(key);
    }
  });
  settings["load"] = saved;
  Trainer resumed = make_trainer(settings);
  resumed.load(saved);
  EXPECT_EQ(resumed.start_iteration(), 1);
}

/// A RoPE model's positions shape no tensor: a checkpoint saved before rule MC-20 raised its context (64 positions
/// under --seq-length 128) loads, and so does one resumed at a longer --seq-length.
TEST_F(CheckpointTest, ARopeCheckpointLoadsWhateverItsContext) {
  nlohmann::json settings = small_checkpoint_settings();
  settings["position_embedding_type"] = "rope";
  settings["seq_length"] = 32;
  settings["save"] = in_dir("run");
  Trainer trainer = make_trainer(settings);
  const std::string saved = trainer.save(1);
  edit_saved_config(saved, [](nlohmann::json& config) {
    ASSERT_EQ(config["max_position_embeddings"], 32);
    config["max_position_embeddings"] = 16;  // what a run before MC-20 saved
  });
  settings["load"] = saved;
  for (const int64_t sequence : {32, 64}) {
    settings["seq_length"] = sequence;
    Trainer resumed = make_trainer(settings);
    EXPECT_EQ(error_of([&] { resumed.load(saved); }), "(no error)") << "--seq-length " << sequence;
  }
  settings["position_embedding_type"] = "learned_absolute";  // learned positions are a table: its size counts
  settings["seq_length"] = 16;
  settings["max_position_embeddings"] = 32;
  Trainer learned = make_trainer(settings);
  EXPECT_NE(error_of([&] { learned.load(saved); }).find("was saved by a different model"), std::string::npos);
}

TEST_F(CheckpointTest, CorruptOrMissingCheckpointIsNamed) {
  nlohmann::json settings = small_checkpoint_settings();
  settings["save"] = in_dir("run");
  Trainer trainer = make_trainer(settings);
  const std::string saved = trainer.save(2);
  ASSERT_EQ(::truncate(join_path(saved, "model.safetensors").c_str(), 100), 0);
  const std::string message = error_of([&] { trainer.load(saved); });
  EXPECT_EQ(message.rfind("checkpoint file '" + saved + "/model.safetensors' is corrupt: ", 0), 0u) << message;
  EXPECT_EQ(error_of([&] { trainer.load(in_dir("nowhere")); }), "--load folder '" + in_dir("nowhere") +
                                                                    "' does not exist; fix: pass a --save folder of an "
                                                                    "earlier run");
  create_directories(in_dir("empty"));
  EXPECT_EQ(error_of([&] { trainer.load(in_dir("empty")); }),
            "--load folder '" + in_dir("empty") +
                "' has neither trainer.json nor a readable "
                "latest_checkpointed_iteration.txt; fix: pass a --save folder or one of its iter_* folders");
}

TEST_F(CheckpointTest, UnwritableSaveLeavesNothingPartial) {
  // The trainer checks --save when it is built (tests/train/output_paths_test.cpp); here the folder
  // turns into a file afterwards, as when a disk goes away mid-run.
  nlohmann::json settings = small_checkpoint_settings();
  settings["save"] = in_dir("a_file/run");
  Trainer trainer = make_trainer(settings);
  remove_all(in_dir("a_file"));
  std::ofstream(in_dir("a_file")) << "not a folder";
  const std::string message = error_of([&] { trainer.save(1); });
  EXPECT_EQ(message.rfind("cannot save the checkpoint to '" + in_dir("a_file/run") + "': ", 0), 0u) << message;
  EXPECT_NE(message.find("; fix: check that the --save folder is writable and has space"), std::string::npos);
  EXPECT_EQ(list_files(dir_), std::vector<std::string>{"a_file"});
  EXPECT_FALSE(path_exists(in_dir("a_file/run")));
}

TEST_F(CheckpointTest, ASaveFolderThatIsAFileIsRefusedWhenTheTrainerIsBuilt) {
  std::ofstream(in_dir("a_file")) << "not a folder";
  nlohmann::json settings = small_checkpoint_settings();
  settings["save"] = in_dir("a_file/run");
  EXPECT_EQ(error_of([&] { make_trainer(settings); }), "cannot write --save '" + in_dir("a_file/run") +
                                                           "': Not a directory; fix: pass --save a folder you can "
                                                           "write to (it is created if missing)");
}

// FP8 delayed scaling's state (OptionalState, "fp8.*") travels in the optimizer's file: loaded where the
// checkpoint has it with its shape, listed as missing otherwise, and skipped by a run that keeps none.
TEST_F(CheckpointTest, OptionalStateLoadsWhereTheCheckpointHasIt) {
  nlohmann::json settings = small_checkpoint_settings();
  Trainer trainer = make_trainer(settings);
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  for (const auto& item : trainer.model()->named_parameters()) parameters.emplace_back(item.key(), item.value());
  auto state = trainer.optimizer().state();
  state.emplace_back("fp8.forward.scale", at::full({4}, 2.5));
  state.emplace_back("fp8.forward.amax_history", at::full({1, 4}, 7.0));
  const config::RunConfig config = graphed::testing::run_config(settings);
  const std::string saved = save_checkpoint_tensors(in_dir("run"), 2, parameters, state, config, at::Device(at::kCPU));

  Trainer other = make_trainer(settings);
  OptionalState optional;
  optional.tensors = {{"fp8.forward.scale", at::ones({4})},             // in the checkpoint: loaded
                      {"fp8.forward.amax_history", at::zeros({2, 4})},  // another history length: missing
                      {"fp8.backward.scale", at::ones({2})}};           // not in the checkpoint: missing
  EXPECT_EQ(load_checkpoint(saved, other.model(), other.optimizer(), config, at::Device(at::kCPU), false, &optional),
            2);
  EXPECT_TRUE(at::equal(optional.tensors[0].second, at::full({4}, 2.5)));
  EXPECT_TRUE(at::equal(optional.tensors[1].second, at::zeros({2, 4})));
  EXPECT_EQ(optional.missing, (std::vector<std::string>{"fp8.forward.amax_history", "fp8.backward.scale"}));

  Trainer plain = make_trainer(settings);  // a run without FP8 state skips it
  plain.load(saved);
  EXPECT_EQ(plain.start_iteration(), 2);
  EXPECT_TRUE(plain.state_not_in_checkpoint().empty());
}

}  // namespace
}  // namespace graphed::train
