// tests/train/trainer_cuda_test.cpp — the trainer on the GPU: the same model from the same seed gives
// the CPU's losses within fp32 (and bf16) tolerance, and a 200-step bf16 run of the small preset on
// the default corpus learns.
#include "graphed/train/trainer.h"

#include <iostream>
#include <sstream>

#include <gtest/gtest.h>

#include "cuda_test.h"
#include "graphed/config/presets.h"
#include "graphed/util/file_system.h"
#include "run_config_for_test.h"

#ifndef GRAPHED_SOURCE_DIR
#define GRAPHED_SOURCE_DIR "."
#endif

namespace graphed::train {
namespace {

using TrainerCudaTest = graphed::testing::CudaTest;

std::vector<double> losses(const nlohmann::json& settings, const at::Device& device, int steps) {
  const config::RunConfig config = graphed::testing::run_config(settings);
  Trainer trainer(config, TokenDataset::open(config.train, config.model, "", 0), device);
  std::vector<double> values;
  for (int it = 0; it < steps; ++it) values.push_back(trainer.train_step(it).loss.item<double>());
  return values;
}

TEST_F(TrainerCudaTest, GpuLossesMatchTheCpu) {
  nlohmann::json settings{{"num_layers", 2},       {"hidden_size", 64},      {"num_attention_heads", 4},
                          {"seq_length", 32},      {"vocab_size", 256},      {"mock_data", true},
                          {"micro_batch_size", 2}, {"global_batch_size", 4}, {"attention_dropout", 0.0},
                          {"hidden_dropout", 0.0}, {"eval_iters", 0},        {"lr", 1e-3}};
  const auto cpu = losses(settings, at::Device(at::kCPU), 5);
  const auto gpu = losses(settings, at::Device(at::kCUDA, 0), 5);
  settings["bf16"] = true;
  const auto bf16 = losses(settings, at::Device(at::kCUDA, 0), 5);
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_NEAR(gpu[i], cpu[i], 1e-4 * std::abs(cpu[i])) << "fp32, step " << i;   // reduction order only
    EXPECT_NEAR(bf16[i], cpu[i], 2e-2 * std::abs(cpu[i])) << "bf16, step " << i;  // 8-bit mantissa
  }
  settings["num_experts"] = 4;
  settings["moe_expert_capacity_factor"] = 1.0;
  settings["moe_pad_expert_input_to_capacity"] = true;
  settings["bf16"] = false;
  const auto moe_cpu = losses(settings, at::Device(at::kCPU), 3);
  const auto moe_gpu = losses(settings, at::Device(at::kCUDA, 0), 3);
  for (std::size_t i = 0; i < moe_cpu.size(); ++i)
    EXPECT_NEAR(moe_gpu[i], moe_cpu[i], 1e-4 * moe_cpu[i]) << "MoE step " << i;
}

TEST_F(TrainerCudaTest, SmallPresetLearnsInBf16For200Steps) {
  const std::string corpus = std::string(GRAPHED_SOURCE_DIR) + "/.deps/data/sotu.txt";
  ASSERT_TRUE(graphed::path_exists(corpus)) << corpus << " is missing: run scripts/setup and carry .deps";
  config::Settings settings;
  config::apply_settings(settings, *config::preset_settings("small"), "preset small");
  config::apply_settings(settings, {{"train_iters", 200}, {"log_interval", 50}, {"eval_interval", 200}}, "test");
  const config::RunConfig config = config::resolve_run_config_or_throw(settings);
  ASSERT_TRUE(config.model.bf16);
  Trainer trainer(config, TokenDataset::open(config.train, config.model, corpus, config.train.eval_iters),
                  at::Device(at::kCUDA, 0));
  std::ostringstream out;
  const TrainSummary summary = trainer.train(out);
  std::cout << out.str();
  ASSERT_EQ(summary.intervals.size(), 4u);
  EXPECT_GT(summary.intervals.front().loss, 3.0) << out.str();
  EXPECT_LT(summary.intervals.back().loss, 2.6) << out.str();
  EXPECT_LT(summary.validation_losses.back().second, 2.8) << out.str();
}

/// Losses of iterations [first, last) of a trainer.
std::vector<double> steps(Trainer& trainer, int first, int last) {
  std::vector<double> values;
  for (int it = first; it < last; ++it) values.push_back(trainer.train_step(it).loss.item<double>());
  return values;
}

// A checkpoint holds the CUDA generator's state too: with dropout on, a run resumed on the GPU repeats
// the uninterrupted one bit for bit.
TEST_F(TrainerCudaTest, ResumeOnTheGpuRepeatsTheUninterruptedRun) {
  const std::string folder = make_temporary_directory("graphed-resume-cuda");
  const nlohmann::json settings{{"num_layers", 2},       {"hidden_size", 64}, {"num_attention_heads", 4},
                                {"seq_length", 32},      {"vocab_size", 256}, {"mock_data", true},
                                {"micro_batch_size", 2}, {"bf16", true},      {"attention_dropout", 0.1},
                                {"hidden_dropout", 0.1}, {"eval_iters", 0},   {"train_iters", 6},
                                {"save", folder}};
  const config::RunConfig config = graphed::testing::run_config(settings);
  const at::Device gpu(at::kCUDA, 0);
  Trainer whole(config, TokenDataset::open(config.train, config.model, "", 0), gpu);
  const std::vector<double> uninterrupted = steps(whole, 0, 6);
  Trainer first_half(config, TokenDataset::open(config.train, config.model, "", 0), gpu);
  steps(first_half, 0, 3);
  first_half.save(3);
  nlohmann::json resume = settings;  // a run that goes on in its --save folder names it in --load
  resume["load"] = folder;
  const config::RunConfig resume_config = graphed::testing::run_config(resume);
  Trainer resumed(resume_config, TokenDataset::open(resume_config.train, resume_config.model, "", 0), gpu);
  resumed.load(folder);
  ASSERT_EQ(resumed.start_iteration(), 3);
  EXPECT_EQ(steps(resumed, 3, 6), std::vector<double>(uninterrupted.begin() + 3, uninterrupted.end()));
}

// A sample runs every graphed unit eagerly (capture::EagerScope): between graph replays of the local impl
// it neither captures nor disturbs them, and it reads the same text as an eager run's sample.
TEST_F(TrainerCudaTest, SamplesRunEagerlyBetweenLocalGraphReplays) {
  const std::string corpus = std::string(GRAPHED_SOURCE_DIR) + "/.deps/data/sotu.txt";
  ASSERT_TRUE(graphed::path_exists(corpus)) << corpus << " is missing: run scripts/setup and carry .deps";
  const auto run = [&](const std::string& impl, std::vector<std::string>& samples) {
    config::Settings settings;
    config::apply_settings(settings, *config::preset_settings("tiny"), "preset tiny");
    config::apply_settings(settings,
                           {{"train_iters", 10},
                            {"lr_warmup_iters", 2},
                            {"eval_iters", 0},
                            {"sample_tokens", 24},
                            {"cuda_graph_impl", impl}},
                           "test");
    const config::RunConfig config = config::resolve_run_config_or_throw(settings);
    Trainer trainer(config, TokenDataset::open(config.train, config.model, corpus, 0), at::Device(at::kCUDA, 0));
    std::vector<double> values = steps(trainer, 0, 7);
    samples.push_back(trainer.sample(7).value_or("(none)"));
    const std::vector<double> after = steps(trainer, 7, 10);
    samples.push_back(trainer.sample(10).value_or("(none)"));
    values.insert(values.end(), after.begin(), after.end());
    return values;
  };
  std::vector<std::string> eager_samples, local_samples;
  const std::vector<double> eager = run("none", eager_samples);
  const std::vector<double> local = run("local", local_samples);
  EXPECT_EQ(local, eager) << "a sample between replays changed the training";
  EXPECT_EQ(local_samples, eager_samples);
  EXPECT_EQ(local_samples.front().rfind("The ", 0), 0u) << local_samples.front();
}

}  // namespace
}  // namespace graphed::train
