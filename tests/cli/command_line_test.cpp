// tests/cli/command_line_test.cpp — argv parsing: Megatron dash flags, underscore forms, Bridge
// comma lists, --no-X booleans, presets < config file < flags, and every bad-input message.
#include "graphed/cli/command_line.h"

#include <fstream>

#include <gtest/gtest.h>

#include "graphed/util/error.h"

namespace graphed::cli {
namespace {

CommandLine parse(std::vector<std::string> arguments) { return parse_command_line(arguments); }

std::vector<std::string> problems_of(std::vector<std::string> arguments) {
  try {
    parse_command_line(arguments);
  } catch (const ConfigError& error) {
    return error.details().empty() ? std::vector<std::string>{error.what()} : error.details();
  }
  return {"(no error)"};
}

std::string problem_of(std::vector<std::string> arguments) {
  const auto problems = problems_of(std::move(arguments));
  EXPECT_EQ(problems.size(), 1u);
  return problems.front();
}

TEST(CommandLineTest, MegatronFlagsSetTheSettings) {
  const CommandLine cl = parse({"check-config", "--num-layers", "4", "--hidden-size", "256", "--num-attention-heads",
                                "8", "--swiglu", "--normalization", "RMSNorm", "--lr", "6e-4", "--num-experts", "8",
                                "--moe-expert-capacity-factor", "1.0", "--cuda-graph-impl", "transformer_engine"});
  EXPECT_EQ(cl.command, "check-config");
  EXPECT_EQ(cl.settings.model.num_layers, 4);
  EXPECT_EQ(cl.settings.model.hidden_size, 256);
  EXPECT_TRUE(cl.settings.model.swiglu);
  EXPECT_EQ(cl.settings.model.normalization, config::Normalization::kRmsNorm);
  EXPECT_DOUBLE_EQ(cl.settings.train.lr, 6e-4);
  EXPECT_EQ(cl.settings.model.num_experts, 8);
  EXPECT_EQ(cl.settings.model.moe_expert_capacity_factor, 1.0);
  EXPECT_EQ(cl.settings.cuda_graph.impl, "transformer_engine");
  EXPECT_EQ(cl.origins.at("num_layers"), "command line");
}

TEST(CommandLineTest, UnderscoreSpellingsAndEqualsSignsWork) {
  const CommandLine cl =
      parse({"check-config", "--num_layers=3", "--cuda_graph_impl", "local", "--micro_batch_size=2"});
  EXPECT_EQ(cl.settings.model.num_layers, 3);
  EXPECT_EQ(cl.settings.cuda_graph.impl, "local");
  EXPECT_EQ(cl.settings.train.micro_batch_size, 2);
}

TEST(CommandLineTest, ModulesTakeSpaceAndCommaLists) {
  const std::vector<std::string> expected{"attn", "moe_router", "moe_preprocess"};
  EXPECT_EQ(parse({"check-config", "--cuda-graph-modules", "attn", "moe_router", "moe_preprocess"})
                .settings.cuda_graph.modules,
            expected);
  EXPECT_EQ(parse({"check-config", "--cuda_graph_scope", "attn,moe_router,moe_preprocess"}).settings.cuda_graph.scope,
            expected);
}

TEST(CommandLineTest, BooleansHaveNegationsAndAliases) {
  EXPECT_FALSE(parse({"check-config", "--no-check-for-nan-in-loss-and-grad"})
                   .settings.cuda_graph.check_for_nan_in_loss_and_grad);
  EXPECT_FALSE(parse({"check-config", "--disable-bias-linear"}).settings.model.add_bias_linear);
  EXPECT_TRUE(parse({"check-config", "--enable-cuda-graph"}).settings.cuda_graph.enable_cuda_graph);
  EXPECT_FALSE(parse({"check-config", "--bf16=false"}).settings.model.bf16);
  EXPECT_EQ(problem_of({"check-config", "--bf16", "--no-bf16"}),
            "both --bf16 and --no-bf16 were given; fix: keep one of them");
}

TEST(CommandLineTest, NegativeNumbersAreValues) {
  EXPECT_EQ(parse({"check-config", "--inference-dynamic-batching-num-cuda-graphs", "-1"})
                .settings.cuda_graph.inference_num_cuda_graphs,
            -1);
}

TEST(CommandLineTest, PresetThenConfigFileThenFlags) {
  const std::string path = ::testing::TempDir() + "command_line_test.json";
  std::ofstream(path) << R"({"num_layers": 6, "hidden_size": 512, "cuda-graph-impl": "full_iteration"})";
  const CommandLine cl = parse({"check-config", "--preset", "small", "--config", path, "--num-layers", "2"});
  EXPECT_EQ(cl.preset, std::optional<std::string>("small"));
  EXPECT_EQ(cl.settings.model.num_layers, 2);     // flag beats file
  EXPECT_EQ(cl.settings.model.hidden_size, 512);  // file beats preset
  EXPECT_EQ(cl.settings.model.seq_length, 128);   // preset beats default
  EXPECT_EQ(cl.settings.cuda_graph.impl, "full_iteration");
  EXPECT_EQ(cl.origins.at("num_layers"), "command line");
  EXPECT_EQ(cl.origins.at("hidden_size"), "--config " + path);
  EXPECT_EQ(cl.origins.at("seq_length"), "preset small");
}

TEST(CommandLineTest, UnknownFlagNamesTheNearest) {
  EXPECT_EQ(
      problem_of({"check-config", "--num-layer", "4"}),
      "unknown flag '--num-layer' (did you mean --num-layers?); fix: see graphed check-config --help for its flags");
  EXPECT_EQ(
      problem_of({"check-config", "--cuda_graph_modul=attn"}),
      "unknown flag '--cuda_graph_modul' (did you mean --cuda-graph-modules?); fix: see graphed check-config --help "
      "for its flags");
  EXPECT_EQ(problem_of({"check-config", "--frobnicate"}),
            "unknown flag '--frobnicate'; fix: see graphed check-config --help for its flags");
  EXPECT_EQ(problem_of({"--num-layer"}),
            "unknown flag '--num-layer' (did you mean --num-layers?); fix: see graphed --help for its flags");
}

// Megatron's flags graphed does not take say what graphed does instead (the nearest spelling would mislead).
TEST(CommandLineTest, MegatronFlagsGraphedDoesNotTakeSayWhatItDoesInstead) {
  EXPECT_EQ(problem_of({"train", "--moe-paged-stash-buffer-size-factor-cpu", "0.5"}),
            "'--moe-paged-stash-buffer-size-factor-cpu' is Megatron-LM's, and graphed does not take it: graphed's "
            "paged stash has no pinned host pool to spill to in this version: a put that finds the device pool full "
            "marks it overflowed, and the iteration runs again dropless; fix: leave it out, and size the device pool "
            "with --moe-paged-stash-buffer-size-factor-cuda");
  // --moe-z-loss-coeff is not --moe-aux-loss-coeff, which the nearest spelling would suggest.
  EXPECT_EQ(problem_of({"train", "--moe-z-loss-coeff", "1e-3"}),
            "'--moe-z-loss-coeff' is Megatron-LM's, and graphed does not take it: graphed's router has no z-loss in "
            "this version (the load-balancing loss is its only one); fix: leave it out");
  EXPECT_EQ(problem_of({"train", "--moe-router-load-balancing-type", "aux_loss"}),
            "'--moe-router-load-balancing-type' is Megatron-LM's, and graphed does not take it: graphed's router "
            "always balances with Megatron's default, aux_loss (the Switch loss, scaled by --moe-aux-loss-coeff); "
            "seq_aux_loss, global_aux_loss and sinkhorn are not in this version; fix: leave it out for aux_loss; for "
            "none, pass --moe-aux-loss-coeff 0");
  const std::string flex = problem_of({"train", "--moe-flex-dispatcher-backend", "hybridep"});
  EXPECT_NE(flex.find("not the flex ones"), std::string::npos) << flex;
  EXPECT_NE(flex.find("fix: leave it out; --expert-model-parallel-size"), std::string::npos) << flex;
  for (const char* flag : {"--moe-router-fusion", "--moe-permute-fusion", "--moe-router-score-function",
                           "--moe-router-enable-expert-bias", "--moe-router-topk-scaling-factor", "--moe-router-dtype",
                           "--moe-token-drop-policy", "--moe-input-jitter-eps", "--ddp-bucket-size"}) {
    EXPECT_EQ(problem_of({"train", flag}).rfind("'" + std::string(flag) + "' is Megatron-LM's", 0), 0u) << flag;
  }
}

TEST(CommandLineTest, OtherProjectsNamesPointToOurs) {
  // nanoGPT's and Hugging Face's spellings: the nearest flag by letters would not find them.
  EXPECT_EQ(problem_of({"train", "--learning-rate", "3e-4"}),
            "unknown flag '--learning-rate' (did you mean --lr? graphed takes Megatron-LM's flag names); fix: see "
            "graphed train --help for its flags");
  EXPECT_EQ(problem_of({"train", "--max_steps=100"}),
            "unknown flag '--max_steps' (did you mean --train-iters? graphed takes Megatron-LM's flag names); fix: "
            "see graphed train --help for its flags");
  EXPECT_EQ(problem_of({"train", "--n-layer", "4"}),
            "unknown flag '--n-layer' (did you mean --num-layers? graphed takes Megatron-LM's flag names); fix: see "
            "graphed train --help for its flags");
  EXPECT_EQ(problem_of({"generate", "--max-tokens", "20"}),
            "unknown flag '--max-tokens' (did you mean --max-new-tokens? graphed takes Megatron-LM's flag names); "
            "fix: see graphed generate --help for its flags");
  // generate has --batch-size of its own; train's is --micro-batch-size.
  EXPECT_EQ(problem_of({"train", "--batch-size", "8"}),
            "unknown flag '--batch-size' (did you mean --micro-batch-size? graphed takes Megatron-LM's flag names); "
            "fix: see graphed train --help for its flags");
}

TEST(CommandLineTest, AFlagOfAnotherCommandSaysWhoseItIs) {
  EXPECT_EQ(problem_of({"generate", "--load", "x", "--preset", "tiny", "--prompt", "x"}),
            "'--preset' is not a flag of graphed generate (it is one of graphed train, bench, check-config); fix: "
            "leave it out: generate takes the model and its settings from --load or --hf");
  EXPECT_EQ(problem_of({"generate", "--load", "x", "--num-layers", "4"}),
            "'--num-layers' is not a flag of graphed generate (it is one of graphed train, bench, check-config); fix: "
            "leave it out: generate takes the model and its settings from --load or --hf");
  EXPECT_EQ(problem_of({"train", "--prompt", "x"}),
            "'--prompt' is not a flag of graphed train (it is one of graphed generate); fix: see graphed train --help "
            "for its flags");
}

TEST(CommandLineTest, EachCommandsHelpSaysWhatItsFlagsDoThere) {
  const std::string generate = *parse({"generate", "--help"}).early_output;
  EXPECT_EQ(generate.find("Presets"), std::string::npos) << "generate takes no --preset:\n" << generate;
  EXPECT_EQ(generate.find("--preset"), std::string::npos) << generate;
  EXPECT_NE(generate.find("a graphed checkpoint to decode with"), std::string::npos) << generate;
  EXPECT_NE(generate.find("the sampling noise's seed"), std::string::npos) << generate;
  EXPECT_NE(generate.find("where to decode"), std::string::npos) << generate;
  EXPECT_EQ(generate.find("resume from"), std::string::npos) << generate;
  EXPECT_EQ(generate.find("initialization, dropout"), std::string::npos) << generate;
  EXPECT_EQ(generate.find("where to train"), std::string::npos) << generate;
  EXPECT_NE(generate.find("print one JSON object: every completion"), std::string::npos) << generate;
  const std::string train = *parse({"train", "--help"}).early_output;
  EXPECT_NE(train.find("Presets (--preset NAME"), std::string::npos) << train;
  EXPECT_NE(train.find("checkpoint folder to resume from"), std::string::npos) << train;
  EXPECT_NE(train.find("print one JSON object per line instead of text"), std::string::npos) << train;
}

TEST(CommandLineTest, UnknownValuesListTheValidOnes) {
  EXPECT_EQ(problem_of({"check-config", "--cuda-graph-impl", "locl"}),
            "unknown value 'locl' for --cuda-graph-impl (did you mean local?); fix: use one of none, local, "
            "transformer_engine, full_iteration");
  EXPECT_EQ(problem_of({"check-config", "--cuda-graph-modules", "attn,mpl"}),
            "unknown value 'mpl' for --cuda-graph-modules (did you mean mlp?); fix: use one of attn, mlp, moe, "
            "moe_router, moe_preprocess, mamba, full, full_iteration, full_iteration_inference");
  EXPECT_EQ(problem_of({"check-config", "--num-layers", "four"})
                .rfind("--num-layers expects an integer, got 'four'; fix: "
                       "give a whole number, such as --num-layers ",
                       0),
            0u);
}

/// A preset's capacity factor can be unset from the command line (MC-7's fix for a dropless MoE), and --help says
/// how.
TEST(CommandLineTest, NoneUnsetsAPresetsOptionalNumber) {
  const CommandLine parsed =
      parse_command_line({"check-config", "--preset", "moe-small", "--moe-expert-capacity-factor", "none",
                          "--no-moe-pad-expert-input-to-capacity"});
  EXPECT_FALSE(parsed.settings.model.moe_expert_capacity_factor.has_value());
  const std::string help = parse_command_line({"train", "--help"}).early_output.value_or("");
  EXPECT_NE(help.find("(default: unset; none unsets it)"), std::string::npos);
}

TEST(CommandLineTest, EveryProblemIsListed) {
  const auto problems = problems_of({"check-config", "--num-layers", "x", "--lr", "y", "--bogus"});
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_EQ(problems[0], "unknown flag '--bogus'; fix: see graphed check-config --help for its flags");
}

TEST(CommandLineTest, DecodingAndServingTakeVllmsCustomAllReduceSwitch) {
  EXPECT_FALSE(parse({"serve", "--hf", "x"}).disable_custom_all_reduce);
  EXPECT_TRUE(parse({"serve", "--hf", "x", "--disable-custom-all-reduce"}).disable_custom_all_reduce);
  EXPECT_TRUE(parse({"bench", "--decode", "--disable-custom-all-reduce"}).disable_custom_all_reduce);
  EXPECT_NE(problem_of({"train", "--disable-custom-all-reduce"}).find("--disable-custom-all-reduce"), std::string::npos)
      << "training keeps NCCL's sums: the flag is not one of train's";
}

TEST(CommandLineTest, ServeTakesTheModelsServerAndEngineFlags) {
  const CommandLine line =
      parse_command_line({"serve", "--hf", "models/qwen", "--port", "8080", "--host", "0.0.0.0", "--api-key", "secret",
                          "--served-model-name", "qwen", "--max-queued-requests", "5", "--inference-max-requests", "32",
                          "--dtype", "bf16"});
  EXPECT_EQ(line.command, "serve");
  EXPECT_EQ(line.generate.hf_folder, "models/qwen");
  EXPECT_EQ(line.generate.dtype, "bf16");
  EXPECT_EQ(line.server.port, 8080);
  EXPECT_EQ(line.server.host, "0.0.0.0");
  EXPECT_EQ(line.server.api_key, "secret");
  EXPECT_EQ(line.server.served_model_name, "qwen");
  EXPECT_EQ(line.server.max_queued, 5);
  EXPECT_EQ(*line.serving.max_requests, 32);
  EXPECT_NE(problem_of({"serve", "--hf", "x", "--num-layers", "4"})
                .find("fix: leave it out: serve takes the model and its settings from --load or --hf"),
            std::string::npos);
  EXPECT_NE(problem_of({"serve", "--hf", "x", "--prompt", "hi"}).find("'--prompt' is not a flag of graphed serve"),
            std::string::npos);
  EXPECT_NE(problem_of({"serve", "--hf", "x", "--seed", "3"}).find("--seed"), std::string::npos);
}

TEST(CommandLineTest, UnknownPresetAndCommand) {
  EXPECT_EQ(problem_of({"check-config", "--preset", "tinyy"}),
            "unknown --preset 'tinyy' (did you mean tiny?); fix: use one of tiny, small, gpt-125m, moe-small, "
            "llama-1b, hybrid-small, moe-1b");
  EXPECT_EQ(problem_of({"chek-config"}),
            "unknown command 'chek-config' (did you mean check-config?); fix: use one of train, bench, check-config, "
            "generate, serve, report, tokenize");
}

TEST(CommandLineTest, MissingValueIsReported) {
  const std::string problem = problem_of({"check-config", "--num-layers"});
  EXPECT_NE(problem.find("--num-layers"), std::string::npos) << problem;
  EXPECT_NE(problem.find("fix: see graphed check-config --help"), std::string::npos) << problem;
}

TEST(CommandLineTest, HelpAndVersionAreText) {
  const CommandLine help = parse({"check-config", "--help"});
  ASSERT_TRUE(help.early_output.has_value());
  EXPECT_NE(help.early_output->find("--cuda-graph-impl"), std::string::npos);
  EXPECT_NE(help.early_output->find("moe-small"), std::string::npos);
  EXPECT_EQ(help.early_output->find("--enable-cuda-graph"), std::string::npos) << "deprecated flags stay hidden";
  const CommandLine version = parse({"--version"});
  ASSERT_TRUE(version.early_output.has_value());
  EXPECT_EQ(version.early_output->rfind("graphed ", 0), 0u);
  const CommandLine nothing = parse({});
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_NE(nothing.early_output->find("check-config"), std::string::npos);
}

TEST(CommandLineTest, HelpWithAPresetListsItsValues) {
  const CommandLine help = parse({"train", "--preset", "tiny", "--help"});
  ASSERT_TRUE(help.early_output.has_value());
  EXPECT_NE(
      help.early_output->find("\nPreset tiny sets (flags override each):\n  --num-layers 2\n  --hidden-size 128\n"),
      std::string::npos)
      << *help.early_output;
  EXPECT_NE(help.early_output->find("  --micro-batch-size 8\n  --train-iters 1500\n  --lr 0.002\n"), std::string::npos);
  const CommandLine unknown = parse({"train", "--preset=tinyy", "--help"});
  EXPECT_NE(unknown.early_output->find("unknown --preset 'tinyy' (did you mean tiny?)"), std::string::npos);
}

}  // namespace
}  // namespace graphed::cli
