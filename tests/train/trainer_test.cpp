// tests/train/trainer_test.cpp — gradient accumulation over microbatches equals one large batch,
// the loop logs and writes metrics, the NaN check stops a diverging run, and the tiny preset learns
// the default corpus on the CPU.
#include "graphed/train/trainer.h"

#include "graphed/config/presets.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "graph_support_for_test.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "run_config_for_test.h"

#ifndef GRAPHED_SOURCE_DIR
#define GRAPHED_SOURCE_DIR "."
#endif

namespace graphed::train {
namespace {

Trainer make_trainer(const nlohmann::json& settings, const std::string& corpus = "") {
  const config::RunConfig config = graphed::testing::run_config(settings);
  return Trainer(config, TokenDataset::open(config.train, config.model, corpus, config.train.eval_iters),
                 at::Device(at::kCPU));
}

nlohmann::json base() {
  return {{"num_layers", 2},          {"hidden_size", 32},     {"num_attention_heads", 2}, {"seq_length", 16},
          {"vocab_size", 64},         {"mock_data", true},     {"train_iters", 4},         {"eval_iters", 0},
          {"attention_dropout", 0.0}, {"hidden_dropout", 0.0}, {"clip_grad", 0.0}};
}

TEST(TrainerTest, MicrobatchesAccumulateLikeOneLargeBatch) {
  nlohmann::json one = base();
  one.update({{"micro_batch_size", 4}, {"global_batch_size", 4}});
  nlohmann::json two = base();
  two.update({{"micro_batch_size", 2}, {"global_batch_size", 4}});
  Trainer a = make_trainer(one);
  Trainer b = make_trainer(two);
  for (int64_t it = 0; it < 3; ++it) {
    const double loss_a = a.train_step(it).loss.item<double>();
    const double loss_b = b.train_step(it).loss.item<double>();
    EXPECT_NEAR(loss_a, loss_b, 1e-5) << "iteration " << it;
  }
  const auto pa = a.model()->parameters();
  const auto pb = b.model()->parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(at::allclose(pa[i], pb[i], 1e-4, 1e-5)) << "parameter " << i;
}

TEST(TrainerTest, FullIterationOnTheCpuIsRefused) {
  nlohmann::json settings = base();
  settings["cuda_graph_impl"] = "full_iteration";
  try {
    make_trainer(settings);
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()), "--cuda-graph-impl full_iteration needs CUDA graphs, but " +
                                             graphed::testing::why_no_graphs_on_cpu() +
                                             "; fix: --cuda-graph-impl none, or train on a GPU");
  }
}

TEST(TrainerTest, LoopLogsAndWritesMetrics) {
  const std::string metrics = ::testing::TempDir() + "trainer_test_metrics.jsonl";
  std::remove(metrics.c_str());
  nlohmann::json settings = base();
  settings.update({{"log_interval", 2}, {"metrics_file", metrics}, {"eval_iters", 1}, {"eval_interval", 4}});
  Trainer trainer = make_trainer(settings);
  std::ostringstream out;
  const TrainSummary summary = trainer.train(out);
  EXPECT_EQ(summary.last_iteration, 4);
  ASSERT_EQ(summary.intervals.size(), 2u);
  EXPECT_EQ(summary.validation_losses.size(), 1u);
  EXPECT_NE(out.str().find("iteration      2/4 | lr "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("tokens/s"), std::string::npos);
  EXPECT_NE(out.str().find("validation loss at iteration 4: "), std::string::npos);
  std::ifstream file(metrics);
  std::string line;
  int lines = 0;
  while (std::getline(file, line)) {
    const auto record = nlohmann::json::parse(line);
    EXPECT_TRUE(record.contains("loss") || record.contains("valid_loss"));
    ++lines;
  }
  EXPECT_EQ(lines, 3);
}

TEST(TrainerTest, NanCheckStopsADivergingRun) {
  nlohmann::json settings = base();
  settings.update({{"lr", 1e30}, {"log_interval", 2}, {"train_iters", 6}});
  Trainer trainer = make_trainer(settings);
  std::ostringstream out;
  try {
    trainer.train(out);
    FAIL() << "no error";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("loss or gradient norm became NaN or Inf between iterations ", 0), 0u) << message;
    EXPECT_NE(message.find("fix: lower --lr"), std::string::npos);
  }
}

// The tiny preset on the default corpus: the loss starts at ln(1024) = 6.93 (uniform over the
// vocabulary) and must fall below 2.8 within 300 CPU steps, i.e. under the ~2.9-3.0 nats of English
// byte frequencies alone, so the model has learned more than which bytes are common. Observed: 2.5.
TEST(TrainerTest, TinyPresetLearnsTheDefaultCorpus) {
  const std::string corpus = std::string(GRAPHED_SOURCE_DIR) + "/.deps/data/sotu.txt";
  ASSERT_TRUE(graphed::path_exists(corpus)) << corpus << " is missing: run scripts/setup";
  config::Settings settings;
  config::apply_settings(settings, *config::preset_settings("tiny"), "preset tiny");
  config::apply_settings(settings, {{"train_iters", 300}, {"log_interval", 50}, {"eval_interval", 300}}, "test");
  const config::RunConfig config = config::resolve_run_config_or_throw(settings);
  Trainer trainer(config, TokenDataset::open(config.train, config.model, corpus, config.train.eval_iters),
                  at::Device(at::kCPU));
  std::ostringstream out;
  const TrainSummary summary = trainer.train(out);
  ASSERT_EQ(summary.intervals.size(), 6u);
  EXPECT_GT(summary.intervals.front().loss, 3.5) << out.str();
  EXPECT_LT(summary.intervals.back().loss, 2.8) << out.str();
  ASSERT_FALSE(summary.validation_losses.empty());
  EXPECT_LT(summary.validation_losses.back().second, 3.0) << out.str();
}

}  // namespace
}  // namespace graphed::train
