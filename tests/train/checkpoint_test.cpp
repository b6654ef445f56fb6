// tests/train/checkpoint_test.cpp — safetensors round trip, checkpoint save/load, bitwise resume
// (with dropout, so the RNG state matters), and the bad-checkpoint errors: corrupt, mismatched,
// missing, unwritable (and no partial checkpoint left behind).
#include "graphed/train/checkpoint.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "error_text.h"

#include "graphed/train/safetensors.h"
#include "graphed/train/trainer.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "run_config_for_test.h"

namespace graphed::train {
namespace {

nlohmann::json small_settings() {
  return {{"num_layers", 2}, {"hidden_size", 32}, {"num_attention_heads", 2}, {"seq_length", 16}, {"vocab_size", 64},
          {"mock_data", true}, {"train_iters", 6}, {"eval_iters", 0}, {"log_interval", 3}, {"attention_dropout", 0.1},
          {"hidden_dropout", 0.1}, {"micro_batch_size", 2}, {"global_batch_size", 4}};
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temporary_directory("checkpoint_test");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override { remove_all(dir_); }
  std::string in_dir(const std::string& name) const { return join_path(dir_, name); }

  Trainer make_trainer(const nlohmann::json& settings) {
    const config::RunConfig config = graphed::testing::run_config(settings);
    return Trainer(config, TokenDataset::open(config.train, config.model, "", 0), at::Device(at::kCPU));
  }
  std::string error_of(const std::function<void()>& action) { return graphed::testing::error_text<Error>(action); }

  std::string dir_;
};

TEST_F(CheckpointTest, SafetensorsRoundTrip) {
  const std::string path = in_dir("t.safetensors");
  const at::Tensor a = at::randn({3, 4});
  const at::Tensor b = at::arange(5, at::kLong);
  const at::Tensor c = at::randn({2}).to(at::kBFloat16);
  write_safetensors(path, {{"a", a}, {"b", b}, {"c", c}}, {{"format", "pt"}});
  const auto read = read_safetensors(path);
  EXPECT_TRUE(at::equal(read.at("a"), a));
  EXPECT_TRUE(at::equal(read.at("b"), b));
  EXPECT_TRUE(at::equal(read.at("c"), c));
  std::ifstream file(path, std::ios::binary);
  uint64_t header_length = 0;
  file.read(reinterpret_cast<char*>(&header_length), 8);
  EXPECT_EQ(header_length % 8, 0u);
}

TEST_F(CheckpointTest, TruncatedSafetensorsIsCorrupt) {
  const std::string path = in_dir("t.safetensors");
  write_safetensors(path, {{"a", at::randn({64})}});
  ASSERT_EQ(::truncate(path.c_str(), file_size(path) - 10), 0);
  EXPECT_EQ(error_of([&] { read_safetensors(path); }),
            "checkpoint file '" + path + "' is corrupt: tensor 'a' lies outside the file or has the wrong byte count "
            "(truncated?); fix: load an earlier checkpoint, or start without --load");
  std::ofstream(path, std::ios::binary) << "xy";
  EXPECT_EQ(error_of([&] { read_safetensors(path); }),
            "checkpoint file '" + path + "' is corrupt: shorter than its 8-byte header length; fix: load an earlier "
            "checkpoint, or start without --load");
}

TEST_F(CheckpointTest, ResumeContinuesBitwiseWithTheSameLosses) {
  nlohmann::json settings = small_settings();
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

  at::manual_seed(12345);  // resuming must not depend on the RNG state before the load
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
  nlohmann::json settings = small_settings();
  settings["save"] = in_dir("run");
  Trainer trainer = make_trainer(settings);
  const std::string saved = trainer.save(1);
  settings["hidden_size"] = 64;
  Trainer other = make_trainer(settings);
  EXPECT_EQ(error_of([&] { other.load(saved); }),
            "checkpoint '" + saved + "' was saved by a different model: --hidden-size is 32 there, 64 here; "
            "--ffn-hidden-size is 128 there, 256 here; fix: pass "
            "the model flags of the run that saved it (its trainer.json lists them)");
}

TEST_F(CheckpointTest, CorruptOrMissingCheckpointIsNamed) {
  nlohmann::json settings = small_settings();
  settings["save"] = in_dir("run");
  Trainer trainer = make_trainer(settings);
  const std::string saved = trainer.save(2);
  ASSERT_EQ(::truncate(join_path(saved, "model.safetensors").c_str(), 100), 0);
  const std::string message = error_of([&] { trainer.load(saved); });
  EXPECT_EQ(message.rfind("checkpoint file '" + saved + "/model.safetensors' is corrupt: ", 0), 0u) << message;
  EXPECT_EQ(error_of([&] { trainer.load(in_dir("nowhere")); }),
            "--load folder '" + in_dir("nowhere") + "' does not exist; fix: pass a --save folder of an "
            "earlier run");
  create_directories(in_dir("empty"));
  EXPECT_EQ(error_of([&] { trainer.load(in_dir("empty")); }),
            "--load folder '" + in_dir("empty") + "' has neither trainer.json nor a readable "
            "latest_checkpointed_iteration.txt; fix: pass a --save folder or one of its iter_* folders");
}

TEST_F(CheckpointTest, UnwritableSaveLeavesNothingPartial) {
  std::ofstream(in_dir("a_file")) << "not a folder";
  nlohmann::json settings = small_settings();
  settings["save"] = in_dir("a_file/run");
  Trainer trainer = make_trainer(settings);
  const std::string message = error_of([&] { trainer.save(1); });
  EXPECT_EQ(message.rfind("cannot save the checkpoint to '" + in_dir("a_file/run") + "': ", 0), 0u) << message;
  EXPECT_NE(message.find("; fix: check that the --save folder is writable and has space"), std::string::npos);
  EXPECT_EQ(list_files(dir_), std::vector<std::string>{"a_file"});
  EXPECT_FALSE(path_exists(in_dir("a_file/run")));
}

}  // namespace
}  // namespace graphed::train
