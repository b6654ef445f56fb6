// tests/train/checkpoint_load_test.cpp — a freshly saved checkpoint, edited into each kind of bad
// input that load_checkpoint and read_checkpoint_info refuse (relabelled dtypes, overlapping or
// out-of-file offsets, missing and extra tensors, RNG states, trainer.json fields), with the exact
// messages; and the removal of temporary folders left by killed saves.
#include "graphed/train/checkpoint.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "train/checkpoint_for_test.h"

#include "graphed/capture/random_states.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/safetensors.h"

namespace graphed::train {
namespace {

const char* const kLoadFix =
    "; fix: pass another checkpoint to --load (an earlier iter_* folder of the same --save folder, say)";
const char* const kModelFix = "; fix: load a checkpoint saved by this model";
const char* const kDeviceFix = "; fix: resume on the kind of device that saved it, or start without --load";

/// A small trainer whose checkpoint after 2 iterations is saved in SetUp (folder_), to be edited.
class CheckpointLoadTest : public graphed::testing::CheckpointFixture {
 protected:
  void SetUp() override {
    CheckpointFixture::SetUp();
    nlohmann::json settings = graphed::testing::small_checkpoint_settings();
    settings["save"] = in_dir("run");
    const config::RunConfig config = graphed::testing::run_config(settings);
    trainer_ =
        std::make_unique<Trainer>(config, TokenDataset::open(config.train, config.model, "", 0), at::Device(at::kCPU));
    folder_ = trainer_->save(2);
    model_file_ = join_path(folder_, "model.safetensors");
    optimizer_file_ = join_path(folder_, "optimizer.safetensors");
  }
  std::string error_of_load() {
    return error_of([&] { trainer_->load(in_dir("run")); });
  }

  /// Rewrites a safetensors file with its JSON header edited; the data section stays as it is.
  static void edit_header(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
    std::string bytes;
    ASSERT_EQ(read_file(path, bytes), 0);
    uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);
    nlohmann::json header = nlohmann::json::parse(bytes.substr(8, length));
    edit(header);
    const std::string text = header.dump();
    const uint64_t new_length = text.size();
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(&new_length), 8);
    file << text << bytes.substr(8 + length);
  }
  /// Rewrites a safetensors file with its tensors edited.
  static void edit_tensors(const std::string& path,
                           const std::function<void(std::map<std::string, at::Tensor>&)>& edit) {
    auto tensors = read_safetensors(path);
    edit(tensors);
    write_safetensors(path, {tensors.begin(), tensors.end()});
  }
  void write_trainer_json(const std::string& text) const { std::ofstream(join_path(folder_, "trainer.json")) << text; }
  /// The name of the tensor whose data starts at byte 0, and of another one.
  static std::pair<std::string, std::string> first_and_second(const nlohmann::json& header) {
    std::string first, second;
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      if (entry["data_offsets"][0] == 0) {
        first = name;
      } else if (second.empty()) {
        second = name;
      }
    }
    return {first, second};
  }

  std::unique_ptr<Trainer> trainer_;
  std::string folder_;
  std::string model_file_;
  std::string optimizer_file_;
};

TEST_F(CheckpointLoadTest, RelabelledDtypeIsRefusedAndNothingIsChanged) {
  const auto before = trainer_->model()->named_parameters().begin()->value().clone();
  const std::string name = trainer_->model()->named_parameters().begin()->key();
  edit_header(model_file_, [&](nlohmann::json& header) { header[name]["dtype"] = "I32"; });
  trainer_->model()->named_parameters().begin()->value().detach().zero_();
  EXPECT_EQ(error_of_load(),
            "tensor '" + name + "' in '" + model_file_ + "' has dtype I32, the model expects F32" + kModelFix);
  EXPECT_EQ(trainer_->model()->named_parameters().begin()->value().abs().sum().item<double>(), 0.0)
      << "a refused checkpoint leaves the model as it was";
  EXPECT_GT(before.abs().sum().item<double>(), 0.0);
}

TEST_F(CheckpointLoadTest, OverlappingDataOffsetsAreRefused) {
  std::string first, second;
  uint64_t first_end = 0, second_end = 0;
  edit_header(model_file_, [&](nlohmann::json& header) {
    std::tie(first, second) = first_and_second(header);
    auto& offsets = header[second]["data_offsets"];
    const uint64_t bytes = offsets[1].get<uint64_t>() - offsets[0].get<uint64_t>();
    offsets = {4, 4 + bytes};
    first_end = header[first]["data_offsets"][1].get<uint64_t>();
    second_end = 4 + bytes;
  });
  EXPECT_EQ(error_of_load(), "checkpoint file '" + model_file_ + "' is corrupt: tensors '" + first + "' [0, " +
                                 std::to_string(first_end) + ") and '" + second + "' [4, " +
                                 std::to_string(second_end) + ") overlap in the data section" + kLoadFix);
}

TEST_F(CheckpointLoadTest, DataOffsetsBeyondTheFileAreRefused) {
  std::string first;
  uint64_t data_bytes = 0, end = 0;
  edit_header(model_file_, [&](nlohmann::json& header) {
    first = first_and_second(header).first;
    for (const auto& [name, entry] : header.items()) {
      if (name != "__metadata__") data_bytes = std::max(data_bytes, entry["data_offsets"][1].get<uint64_t>());
    }
    auto& offsets = header[first]["data_offsets"];
    end = data_bytes + offsets[1].get<uint64_t>();
    offsets = {data_bytes, end};
  });
  EXPECT_EQ(error_of_load(), "checkpoint file '" + model_file_ + "' is corrupt: tensor '" + first +
                                 "' has "
                                 "data_offsets [" +
                                 std::to_string(data_bytes) + "," + std::to_string(end) +
                                 "], beyond "
                                 "the data section of " +
                                 std::to_string(data_bytes) + " bytes (truncated?)" + kLoadFix);
}

TEST_F(CheckpointLoadTest, HeaderLengthBeyondTheFileIsRefused) {
  const auto size = static_cast<uint64_t>(file_size(optimizer_file_));
  {
    std::fstream file(optimizer_file_, std::ios::binary | std::ios::in | std::ios::out);
    file.write(reinterpret_cast<const char*>(&size), 8);
  }
  EXPECT_EQ(error_of_load(), "checkpoint file '" + optimizer_file_ + "' is corrupt: header length " +
                                 std::to_string(size) + " exceeds the " + std::to_string(size - 8) + " bytes after it" +
                                 kLoadFix);
}

TEST_F(CheckpointLoadTest, NegativeAndEnormousShapesAreRefusedWithoutAllocating) {
  const std::string name = trainer_->model()->named_parameters().begin()->key();
  edit_header(model_file_, [&](nlohmann::json& header) { header[name]["shape"][0] = -3; });
  const std::string message = error_of_load();
  EXPECT_EQ(message.rfind("checkpoint file '" + model_file_ + "' is corrupt: tensor '" + name + "' has shape [-3,", 0),
            0u)
      << message;
  EXPECT_NE(message.find("], expected an array of integers >= 0" + std::string(kLoadFix)), std::string::npos);
  edit_header(model_file_, [&](nlohmann::json& header) { header[name]["shape"] = {uint64_t{1} << 62, 1024}; });
  EXPECT_EQ(error_of_load(), "checkpoint file '" + model_file_ + "' is corrupt: tensor '" + name +
                                 "' has shape "
                                 "[4611686018427387904,1024], whose element count overflows int64" +
                                 kLoadFix);
}

TEST_F(CheckpointLoadTest, MissingTensorIsNamed) {
  const std::string name = trainer_->model()->named_parameters().begin()->key();
  edit_tensors(model_file_, [&](auto& tensors) { tensors.erase(name); });
  EXPECT_EQ(error_of_load(),
            "checkpoint file '" + model_file_ + "' lacks 1 tensor that the model has: '" + name + "'" + kModelFix);
  edit_tensors(optimizer_file_, [&](auto& tensors) { tensors.erase("lr"); });
  edit_tensors(model_file_, [&](auto& tensors) { tensors[name] = trainer_->model()->named_parameters()[name]; });
  EXPECT_EQ(error_of_load(),
            "checkpoint file '" + optimizer_file_ + "' lacks 1 tensor that the optimizer has: 'lr'" + kModelFix);
}

TEST_F(CheckpointLoadTest, ExtraTensorsAreListed) {
  edit_tensors(model_file_, [](auto& tensors) {
    for (int i = 0; i < 7; ++i) tensors["extra." + std::to_string(i)] = at::zeros({2});
  });
  EXPECT_EQ(error_of_load(), "checkpoint file '" + model_file_ +
                                 "' has 7 tensors that the model does not: "
                                 "'extra.0', 'extra.1', 'extra.2', 'extra.3', 'extra.4' and 2 more" +
                                 kModelFix);
}

TEST_F(CheckpointLoadTest, MissingRngStateIsAnError) {
  edit_tensors(optimizer_file_, [](auto& tensors) { tensors.erase("rng.cpu"); });
  EXPECT_EQ(error_of_load(), "checkpoint file '" + optimizer_file_ +
                                 "' has no RNG state 'rng.cpu' (device cpu), so "
                                 "the resumed run could not repeat the uninterrupted one" +
                                 kDeviceFix);
}

TEST_F(CheckpointLoadTest, RngStateOfAnotherDtypeOrSizeIsAnError) {
  const at::Tensor state = capture::rng_states(at::Device(at::kCPU)).at(0).second;
  const std::string size = std::to_string(state.numel());
  edit_tensors(optimizer_file_, [](auto& tensors) { tensors["rng.cpu"] = tensors["rng.cpu"].to(at::kInt); });
  EXPECT_EQ(error_of_load(), "RNG state 'rng.cpu' in '" + optimizer_file_ + "' has dtype I32 and shape [" + size +
                                 "], this device's generator has U8 and [" + size + "]" + kDeviceFix);
  edit_tensors(optimizer_file_,
               [](auto& tensors) { tensors["rng.cpu"] = tensors["rng.cpu"].to(at::kByte).narrow(0, 0, 16); });
  EXPECT_EQ(error_of_load(), "RNG state 'rng.cpu' in '" + optimizer_file_ +
                                 "' has dtype U8 and shape [16], this "
                                 "device's generator has U8 and [" +
                                 size + "]" + kDeviceFix);
  edit_tensors(optimizer_file_, [&](auto& tensors) {
    tensors["rng.cpu"] = state;
    tensors["rng.cuda"] = at::zeros({16}, at::kByte);
  });
  EXPECT_EQ(error_of_load(), "checkpoint file '" + optimizer_file_ +
                                 "' has RNG state 'rng.cuda', which device cpu "
                                 "does not have, so the resumed run could not repeat the uninterrupted one" +
                                 kDeviceFix);
}

TEST_F(CheckpointLoadTest, ACheckpointOfAGpuRunIsNamedAsSuchOnTheCpu) {
  // What a GPU run saves: a CUDA RNG state beside the CPU's, and the learning rate in float32 (the
  // fused kernel's). It once read "tensor 'lr' ... has dtype F32, the optimizer expects F64; fix: load a
  // checkpoint saved by this model", which it was.
  edit_tensors(optimizer_file_, [](auto& tensors) {
    tensors["rng.cuda"] = at::zeros({16}, at::kByte);
    tensors["lr"] = tensors["lr"].to(at::kFloat);
  });
  EXPECT_EQ(error_of_load(), "checkpoint file '" + optimizer_file_ +
                                 "' has RNG state 'rng.cuda', which device cpu "
                                 "does not have, so the resumed run could not repeat the uninterrupted one" +
                                 kDeviceFix);
}

TEST_F(CheckpointLoadTest, MalformedTrainerJsonNamesTheField) {
  const std::string path = join_path(folder_, "trainer.json");
  const auto corrupt = [&](const std::string& what) {
    return "checkpoint file '" + path + "' is corrupt: " + what + kLoadFix;
  };
  write_trainer_json("[]");
  EXPECT_EQ(error_of_load(), corrupt("it is a JSON array, expected an object with 'iteration' and 'config'"));
  write_trainer_json("{}");
  EXPECT_EQ(error_of_load(), corrupt("field 'iteration' is missing, expected an integer >= 0"));
  write_trainer_json(R"({"iteration": -5, "config": {}})");
  EXPECT_EQ(error_of_load(), corrupt("field 'iteration' is -5, expected an integer >= 0"));
  write_trainer_json(R"({"iteration": "5", "config": {}})");
  EXPECT_EQ(error_of_load(), corrupt("field 'iteration' is \"5\", expected an integer >= 0"));
  write_trainer_json(R"({"iteration": 5})");
  EXPECT_EQ(error_of_load(), corrupt("field 'config' is missing, expected an object (the settings of the run that "
                                     "saved it)"));
  write_trainer_json(R"({"iteration": 5, "config": [1]})");
  EXPECT_EQ(error_of_load(), corrupt("field 'config' is [1], expected an object (the settings of the run that saved "
                                     "it)"));
  write_trainer_json(R"({"iteration": 5, "config": {}, "graphed_version": 3})");
  EXPECT_EQ(error_of_load(), corrupt("field 'graphed_version' is 3, expected a string"));
  write_trainer_json("iteration: 5");
  EXPECT_EQ(error_of_load(), corrupt("it is not JSON (syntax error at byte 1)"));
  remove_all(path);
  EXPECT_EQ(error_of([&] { trainer_->load(folder_); }),
            "--load folder '" + folder_ +
                "' has neither trainer.json nor a readable latest_checkpointed_iteration.txt; "
                "fix: pass a --save folder or one of its iter_* folders");
}

TEST_F(CheckpointLoadTest, BadLatestIterationFileIsNamed) {
  const std::string latest = in_dir("run/latest_checkpointed_iteration.txt");
  std::ofstream(latest) << "two\n";
  EXPECT_EQ(error_of_load(), "'" + latest +
                                 "' holds \"two\\n\", expected an iteration number >= 0; fix: write the "
                                 "iteration of one of the iter_* folders there, or pass that folder to --load");
  std::ofstream(latest) << "7\n";
  EXPECT_EQ(error_of_load(), "'" + latest + "' names iteration 7, but '" + in_dir("run/iter_0000007") +
                                 "' does not "
                                 "exist; fix: pass one of the iter_* folders of '" +
                                 in_dir("run") +
                                 "' to --load, or write "
                                 "its iteration there");
}

TEST_F(CheckpointLoadTest, CheckpointInfoIsReadWithoutTheTensors) {
  remove_all(model_file_);
  const CheckpointInfo info = read_checkpoint_info(in_dir("run"));
  EXPECT_EQ(info.folder, folder_);
  EXPECT_EQ(info.iteration, 2);
  EXPECT_EQ(info.config.at("hidden_size"), 32);
  EXPECT_FALSE(info.graphed_version.empty());
  EXPECT_EQ(read_checkpoint_info(folder_).folder, folder_);
  const std::string message = graphed::testing::error_text<CheckpointError>([&] { trainer_->load(in_dir("run")); });
  EXPECT_EQ(message, "cannot read checkpoint file '" + model_file_ +
                         "': No such file or directory; fix: pass the "
                         "folder of a complete checkpoint to --load");
}

TEST_F(CheckpointLoadTest, SaveRemovesTemporaryFoldersOfKilledRuns) {
  const std::string dead = in_dir("run/iter_0000001.tmp-999999999");  // above any pid_max: no such process
  const std::string own = in_dir("run/iter_0000001.tmp-" + std::to_string(::getpid()));
  const std::string live = in_dir("run/iter_0000001.tmp-" + std::to_string(::getppid()));
  const std::string other = in_dir("run/notes.tmp-999999999");
  // The ranks' moment runs of a killed sharded save (named with its rank 0's process id), and of a live one.
  const std::string dead_shards = in_dir("run/iter_0000001.tmp-optimizer-shards-999999999");
  const std::string live_shards = in_dir("run/iter_0000001.tmp-optimizer-shards-" + std::to_string(::getppid()));
  for (const auto& folder : {dead, own, live, other, dead_shards, live_shards}) {
    ASSERT_EQ(create_directories(folder), 0);
    std::ofstream(join_path(folder, "model.safetensors")) << "partial";
  }
  trainer_->save(3);
  EXPECT_FALSE(path_exists(dead)) << "its process is gone";
  EXPECT_FALSE(path_exists(own)) << "this process saves one checkpoint at a time";
  EXPECT_TRUE(path_exists(live)) << "a live process may be saving it now";
  EXPECT_TRUE(path_exists(other)) << "not a checkpoint folder";
  EXPECT_FALSE(path_exists(dead_shards)) << "its process is gone";
  EXPECT_TRUE(path_exists(live_shards)) << "a live process may be saving it now";
  EXPECT_EQ(list_directories(in_dir("run")),
            (std::vector<std::string>{"iter_0000001.tmp-" + std::to_string(::getppid()),
                                      "iter_0000001.tmp-optimizer-shards-" + std::to_string(::getppid()),
                                      "iter_0000002", "iter_0000003", "notes.tmp-999999999"}));
}

}  // namespace
}  // namespace graphed::train
