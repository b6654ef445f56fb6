// tests/train/checkpoint_test.cpp — safetensors round trip, checkpoint save/load, bitwise resume
// (with dropout, so the RNG state matters), and the bad-checkpoint errors: corrupt, mismatched,
// missing, unwritable (and no partial checkpoint left behind).
#include "graphed/train/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "graphed/train/safetensors.h"
#include "graphed/train/trainer.h"
#include "graphed/util/error.h"
#include "run_config_for_test.h"

namespace graphed::train {
namespace {

namespace fs = std::filesystem;

nlohmann::json small_settings() {
  return {{"num_layers", 2}, {"hidden_size", 32}, {"num_attention_heads", 2}, {"seq_length", 16}, {"vocab_size", 64},
          {"mock_data", true}, {"train_iters", 6}, {"eval_iters", 0}, {"log_interval", 3}, {"attention_dropout", 0.1},
          {"hidden_dropout", 0.1}, {"micro_batch_size", 2}, {"global_batch_size", 4}};
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("checkpoint_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Trainer make_trainer(const nlohmann::json& settings) {
    const config::RunConfig config = graphed::testing::run_config(settings);
    return Trainer(config, TokenDataset::open(config.train, config.model, "", 0), at::Device(at::kCPU));
  }
  std::string error_of(const std::function<void()>& action) {
    try {
      action();
    } catch (const Error& error) {
      return error.what();
    }
    return "(no error)";
  }

  fs::path dir_;
};

TEST_F(CheckpointTest, SafetensorsRoundTrip) {
  const std::string path = (dir_ / "t.safetensors").string();
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
  const std::string path = (dir_ / "t.safetensors").string();
  write_safetensors(path, {{"a", at::randn({64})}});
  fs::resize_file(path, fs::file_size(path) - 10);
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
  settings["save"] = (dir_ / "run").string();
  settings["save_interval"] = 3;
  Trainer uninterrupted = make_trainer(settings);
  std::vector<double> expected;
  for (int64_t it = 0; it < 6; ++it) {
    expected.push_back(uninterrupted.train_step(it).loss.item<double>());
    if (it == 2) uninterrupted.save(3);
  }
  EXPECT_TRUE(fs::exists(dir_ / "run" / "iter_0000003" / "model.safetensors"));
  std::ifstream latest(dir_ / "run" / "latest_checkpointed_iteration.txt");
  int64_t latest_iteration = 0;
  latest >> latest_iteration;
  EXPECT_EQ(latest_iteration, 3);

  at::manual_seed(12345);  // resuming must not depend on the RNG state before the load
  Trainer resumed = make_trainer(settings);
  resumed.load((dir_ / "run").string());
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
  settings["save"] = (dir_ / "run").string();
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
  settings["save"] = (dir_ / "run").string();
  Trainer trainer = make_trainer(settings);
  const std::string saved = trainer.save(2);
  fs::resize_file(fs::path(saved) / "model.safetensors", 100);
  const std::string message = error_of([&] { trainer.load(saved); });
  EXPECT_EQ(message.rfind("checkpoint file '" + saved + "/model.safetensors' is corrupt: ", 0), 0u) << message;
  EXPECT_EQ(error_of([&] { trainer.load((dir_ / "nowhere").string()); }),
            "--load folder '" + (dir_ / "nowhere").string() + "' does not exist; fix: pass a --save folder of an "
            "earlier run");
  fs::create_directories(dir_ / "empty");
  EXPECT_EQ(error_of([&] { trainer.load((dir_ / "empty").string()); }),
            "--load folder '" + (dir_ / "empty").string() + "' has neither trainer.json nor a readable "
            "latest_checkpointed_iteration.txt; fix: pass a --save folder or one of its iter_* folders");
}

TEST_F(CheckpointTest, UnwritableSaveLeavesNothingPartial) {
  std::ofstream(dir_ / "a_file") << "not a folder";
  nlohmann::json settings = small_settings();
  settings["save"] = (dir_ / "a_file" / "run").string();
  Trainer trainer = make_trainer(settings);
  const std::string message = error_of([&] { trainer.save(1); });
  EXPECT_EQ(message.rfind("cannot save the checkpoint to '" + (dir_ / "a_file" / "run").string() + "': ", 0), 0u) << message;
  EXPECT_NE(message.find("; fix: check that the --save folder is writable and has space"), std::string::npos);
  std::size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) entries += entry.path().filename() != "a_file";
  EXPECT_EQ(entries, 0u);
}

}  // namespace
}  // namespace graphed::train
