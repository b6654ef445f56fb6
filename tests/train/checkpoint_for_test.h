// tests/train/checkpoint_for_test.h — what the checkpoint tests share: a temporary folder, a small
// CPU trainer with dropout (so the RNG state matters), and the error text of an action.
#pragma once

#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_text.h"
#include "run_config_for_test.h"

#include "graphed/train/trainer.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::testing {

/// Two layers of hidden size 32 on mock data, 6 iterations, dropout 0.1.
inline nlohmann::json small_checkpoint_settings() {
  return {{"num_layers", 2},       {"hidden_size", 32},        {"num_attention_heads", 2}, {"seq_length", 16},
          {"vocab_size", 64},      {"mock_data", true},        {"train_iters", 6},         {"eval_iters", 0},
          {"log_interval", 3},     {"attention_dropout", 0.1}, {"hidden_dropout", 0.1},    {"micro_batch_size", 2},
          {"global_batch_size", 4}};
}

class CheckpointFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temporary_directory("checkpoint_test");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override { remove_all(dir_); }
  std::string in_dir(const std::string& name) const { return join_path(dir_, name); }

  train::Trainer make_trainer(const nlohmann::json& settings) {
    const config::RunConfig config = run_config(settings);
    return train::Trainer(config, train::TokenDataset::open(config.train, config.model, "", 0), at::Device(at::kCPU));
  }
  std::string error_of(const std::function<void()>& action) { return error_text<Error>(action); }

  std::string dir_;
};

}  // namespace graphed::testing
