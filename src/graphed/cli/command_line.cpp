// cli/command_line.cpp — CLI11 wiring for the settings table. CLI11 only collects raw tokens;
// config/settings.cpp checks them, so flags, presets and config files share one set of messages.
#include "graphed/cli/command_line.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>

#include "graphed/cli/tokenize_command.h"
#include "graphed/cli/unknown_flags.h"
#include "graphed/config/config_file.h"
#include "graphed/config/cuda_graph_config.h"
#include "graphed/config/presets.h"
#include "graphed/util/build_info.h"
#include "graphed/util/error.h"
#include "graphed/util/text.h"

namespace graphed::cli {
namespace {

using nlohmann::json;

struct CommandInfo {
  std::string name;
  std::string description;
};

const std::vector<CommandInfo>& commands() {
  static const std::vector<CommandInfo> list{
      {"train", "train a model (--preset, --config, flags); progress at --log-interval"},
      {"bench", "time training iterations per --impls on synthetic data and print a table"},
      {"check-config", "print the normalized configuration, each migration and warning; exit 1 on an error"},
      {"generate",
       "continue prompts with a model from --load or --hf, with decode graphs per --inference-cuda-graph-scope"},
      {"serve", "serve a model from --load or --hf over HTTP with OpenAI's completions and chat completions API"},
      {"report", "write one HTML page of charts from metrics files, run folders and bench JSON files"},
      {"tokenize",
       "encode text into token ids, or --decode ids into text, with a tokenizer.json, GPT-2 vocab folder or bytes"},
  };
  return list;
}

/// The CLI11 options that belong to one setting.
struct SettingOptions {
  const config::SettingSpec* spec = nullptr;
  CLI::Option* option = nullptr;    // value option, or the positive flag of a boolean
  CLI::Option* negation = nullptr;  // --no-X of a boolean
};

struct FlagSet {
  std::vector<SettingOptions> settings;
  std::vector<std::pair<const config::SettingAlias*, CLI::Option*>> aliases;
  std::string preset;
  std::string config_file;
  std::vector<std::string> debug_channels;
  bool json_output = false;
  std::vector<std::string> impls;
  int64_t bench_iters = 20;
  int64_t bench_warmup = 5;
  int64_t profile_iterations = 0;
  bool bench_decode = false;
  std::vector<int64_t> decode_batches;
  std::vector<std::string> decode_scopes;
  int64_t decode_prompt_tokens = 32;
  int64_t decode_new_tokens = 128;
};

std::string group_of(const config::SettingSpec& spec) {
  if (spec.deprecated) return "";  // hidden from --help
  if (spec.section == "model") return "Model";
  if (spec.section == "train") return "Training";
  return "CUDA graphs";
}

/// Whether a command takes its model from --load or --hf and decodes with it (generate, serve).
bool runs_a_model(const std::string& command) { return command == "generate" || command == "serve"; }

/// What a setting does in `graphed generate`, where it differs from training's words.
std::optional<std::string> generate_help(const std::string& key) {
  static const std::map<std::string, std::string> help{
      {"load",
       "a graphed checkpoint to decode with: a --save folder (its latest checkpoint) or one of its iter_* folders"},
      {"seed", "the sampling noise's seed (with --temperature > 0): the same seed gives the same text"},
      {"device", "where to decode; auto = CUDA if this build and machine have it"},
  };
  const auto found = help.find(key);
  return found == help.end() ? std::nullopt : std::optional<std::string>(found->second);
}

std::string help_text(const config::SettingSpec& spec, const std::string& command) {
  const std::optional<std::string> own = runs_a_model(command) ? generate_help(spec.key) : std::nullopt;
  const bool unsettable =
      spec.optional && (spec.kind == config::SettingKind::kInt || spec.kind == config::SettingKind::kFloat);
  std::string text = own.value_or(spec.help) +
                     " (default: " + config::setting_value_text(spec.read(config::Settings{})) +
                     (unsettable ? "; none unsets it" : "") + ")";
  if (!spec.choices.empty()) text += " {" + join(spec.choices, ",") + "}";
  return text;
}

/// What --json prints, per command.
std::string json_help(const std::string& command) {
  if (command == "train") {
    return "print one JSON object per line instead of text: each log interval, capture, checkpoint, evaluation and "
           "sample, then a summary (\"event\": \"done\"); notes go to stderr";
  }
  if (command == "bench") return "print the table as a JSON array, one object per row";
  if (command == "generate") return "print one JSON object: every completion with its ids and text, and the timings";
  if (command == "serve")
    return "print the ready line as one JSON object (address, port, model, engine) instead of text";
  return "print the configuration, its migrations and every rule that fired as one JSON object";
}

/// Whether a command takes --preset and --config (generate takes its model from --load or --hf).
bool takes_presets(const std::string& command) { return !runs_a_model(command); }

/// The settings `graphed generate` takes as flags: the CUDA-graph ones (the legacy spellings migrate),
/// the checkpoint, the device and the seed. The model's own settings come from the checkpoint.
bool is_generate_setting(const config::SettingSpec& spec) {
  static const std::vector<std::string> keys{"cuda_graph_impl",
                                             "inference_cuda_graph_scope",
                                             "inference_dynamic_batching_num_cuda_graphs",
                                             "cuda_graph_scope",
                                             "enable_cuda_graph",
                                             "external_cuda_graph",
                                             "seed",
                                             "load",
                                             "device"};
  return std::find(keys.begin(), keys.end(), spec.key) != keys.end();
}

void add_setting_flags(CLI::App& app, FlagSet& flags, const std::string& command) {
  const bool generate = runs_a_model(command);
  for (const auto& spec : config::setting_specs()) {
    // serve also runs as a tensor-parallel group (launched with torchrun)
    const bool served_layout = command == "serve" && spec.key == "tensor_model_parallel_size";
    if (generate && !is_generate_setting(spec) && !served_layout) continue;
    if (command == "serve" && spec.key == "seed") continue;  // each request brings its own seed
    SettingOptions entry;
    entry.spec = &spec;
    // "--num-layers,--num_layers"; a one-word key has one spelling ("--seed").
    const std::string names = spec.flag() + (spec.flag() == spec.underscore_flag() ? "" : "," + spec.underscore_flag());
    // generate takes the checkpoint, device and seed from the training settings: its own group there.
    const std::string own_group = command == "serve" ? "Model and device" : "Model, device and seed";
    const std::string group = generate && spec.section != "cuda_graph" ? own_group : group_of(spec);
    if (spec.kind == config::SettingKind::kBool) {
      entry.option = app.add_flag(names)->description(help_text(spec, command))->group(group);
      const std::string negative = "--no-" + spec.flag().substr(2) + ",--no_" + spec.key;
      entry.negation = app.add_flag(negative)->description("turn off " + spec.flag())->group("");
    } else if (spec.kind == config::SettingKind::kList || spec.kind == config::SettingKind::kChoiceList) {
      entry.option = app.add_option(names)
                         ->description(help_text(spec, command))
                         ->expected(1, CLI::detail::expected_max_vector_size)
                         ->allow_extra_args()
                         ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                         ->group(group);
    } else {
      entry.option = app.add_option(names)
                         ->description(help_text(spec, command))
                         ->expected(1)
                         ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                         ->group(group);
    }
    flags.settings.push_back(entry);
  }
  app.add_option("--debug", flags.debug_channels, "turn on a debug channel (capture, config, ..., all)");
  app.add_flag("--json", flags.json_output, json_help(command));
  if (!takes_presets(command)) return;
  for (const auto& alias : config::setting_aliases()) {
    flags.aliases.emplace_back(&alias, app.add_flag(alias.flag)->description(alias.help)->group("Model"));
  }
  app.add_option("--preset", flags.preset,
                 "starting values: " + join(config::preset_names(), ", ") + " (flags override)");
  app.add_option("--config", flags.config_file, "JSON file of settings, applied after --preset (flags override)");
}

/// Converts the collected CLI11 results into a JSON object of settings, collecting every problem.
json collect_flag_values(const FlagSet& flags, std::vector<std::string>& problems) {
  json values = json::object();
  for (const auto& entry : flags.settings) {
    const auto& spec = *entry.spec;
    try {
      if (spec.kind == config::SettingKind::kBool) {
        const bool on = entry.option->count() > 0;
        const bool off = entry.negation->count() > 0;
        if (on && off) {
          problems.push_back("both " + spec.flag() + " and --no-" + spec.flag().substr(2) +
                             " were given; fix: keep one of them");
        } else if (on) {
          values[spec.key] = config::parse_setting_tokens(spec, {entry.option->results().back()}, spec.flag());
        } else if (off) {
          values[spec.key] = false;
        }
      } else if (entry.option->count() > 0) {
        std::vector<std::string> tokens = entry.option->results();
        if (spec.kind != config::SettingKind::kList && spec.kind != config::SettingKind::kChoiceList) {
          tokens = {tokens.back()};
        }
        values[spec.key] = config::parse_setting_tokens(spec, tokens, spec.flag());
      }
    } catch (const ConfigError& error) {
      problems.push_back(error.what());
    }
  }
  for (const auto& [alias, option] : flags.aliases) {
    if (option->count() == 0) continue;
    if (values.contains(alias->key)) {
      problems.push_back(alias->flag + " conflicts with --" + alias->key + "; fix: keep one of them");
    } else {
      values[alias->key] = alias->value;
    }
  }
  return values;
}

std::string unknown_preset_message(const std::string& preset) {
  std::string message = "unknown --preset '" + preset + "'";
  if (const auto near = nearest_match(preset, config::preset_names())) message += " (did you mean " + *near + "?)";
  return message + "; fix: use one of " + join(config::preset_names(), ", ");
}

/// The --preset value among the arguments, for --help (which CLI11 answers before parsing finishes).
std::optional<std::string> preset_argument(const std::vector<std::string>& arguments) {
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i] == "--preset" && i + 1 < arguments.size()) return arguments[i + 1];
    if (arguments[i].rfind("--preset=", 0) == 0) return arguments[i].substr(9);
  }
  return std::nullopt;
}

/// "Preset tiny sets:" and one "--flag value" per setting, in the settings table's order.
std::string preset_values_text(const std::string& name) {
  const auto values = config::preset_settings(name);
  if (!values) return "\n" + unknown_preset_message(name) + "\n";
  std::string text = "\nPreset " + name + " sets (flags override each):\n";
  for (const auto& spec : config::setting_specs()) {
    if (!values->contains(spec.key)) continue;
    text += "  " + spec.flag() + " " + config::setting_value_text((*values)[spec.key]) + "\n";
  }
  return text;
}

/// The help CLI11 writes (the command's when one is given), then the presets where the command takes them.
std::string help_with_lists(const CLI::App& app, const std::optional<std::string>& preset, const std::string& command) {
  std::string text = app.help();  // CLI11 lists the subcommands itself
  if (!takes_presets(command)) return text;
  if (preset) return text + preset_values_text(*preset);
  text += "\nPresets (--preset NAME; with --help, shows its values):\n";
  for (const auto& name : config::preset_names()) {
    text += "  " + name + std::string(12 - std::min<std::size_t>(name.size(), 11), ' ') + config::preset_summary(name) +
            "\n";
  }
  text += "\nRun `graphed <command> --help` for every flag.\n";
  return text;
}

void add_bench_flags(CLI::App& bench, FlagSet& flags) {
  bench
      .add_option("--impls", flags.impls,
                  "implementations to time, one row each (default none): none, local, "
                  "local:attn+mlp, transformer_engine, transformer_engine:attn+mlp (a per-layer impl with those "
                  "modules), full_iteration, full_iteration+optimizer")
      ->delimiter(',');
  bench.add_option("--bench-iters", flags.bench_iters, "timed iterations per implementation (default 20)");
  bench.add_option("--bench-warmup", flags.bench_warmup, "untimed iterations before timing (default 5)");
  bench.add_option("--profile-iterations", flags.profile_iterations,
                   "after timing, run this many more iterations per implementation inside a profiler range (CUDA's "
                   "cudaProfilerStart/Stop), for ncu --profile-from-start off (default 0: none); with --serve, this "
                   "many serving steps (see --profile-phase)");
  bench.add_flag("--decode", flags.bench_decode,
                 "time decoding instead of training: scopes none, layer and block of "
                 "the preset's model with random weights (bf16 on a GPU), one row per scope and batch");
  bench.add_option("--decode-batches", flags.decode_batches, "batch sizes of --decode (default 1,8,32)")
      ->delimiter(',');
  bench
      .add_option("--decode-scopes", flags.decode_scopes,
                  "inference graph scopes of --decode (default none,layer,block)")
      ->delimiter(',');
  bench.add_option("--decode-prompt-tokens", flags.decode_prompt_tokens,
                   "random prompt length of --decode (default 32)");
  bench.add_option("--decode-new-tokens", flags.decode_new_tokens, "tokens drawn per prompt by --decode (default 128)");
}

/// The model's own flags, shared by generate and serve: --hf, --tokenizer, --dtype.
void add_model_flags(CLI::App& command, GenerateFlags& flags, const std::string& group) {
  command
      .add_option("--hf", flags.hf_folder,
                  "a Hugging Face model folder (config.json, safetensors, tokenizer.json): "
                  "Llama 1/2/3, Qwen2/2.5, Qwen3, GPT-2")
      ->group(group);
  command
      .add_option("--tokenizer", flags.tokenizer,
                  "tokenizer.json, a folder with one (or vocab.json + merges.txt), or "
                  "'bytes'; default: the model folder's own, or bytes for a model trained on text")
      ->group(group);
  command
      .add_option("--dtype", flags.dtype, "weights and cache: auto (bf16 on a GPU, fp32 on the CPU), bf16, fp16, fp32")
      ->group(group);
}

void add_generate_flags(CLI::App& generate, GenerateFlags& flags) {
  const std::string group = "Generation";
  add_model_flags(generate, flags, group);
  generate.add_option("--prompt", flags.prompts, "a prompt (repeatable: one prompt each)")
      ->group(group)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  generate.add_option("--prompt-file", flags.prompt_files, "a file whose whole text is one prompt (repeatable)")
      ->group(group)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  generate.add_option("--prompt-ids", flags.prompt_ids, "a prompt as token ids, \"1 2 3\" or 1,2,3 (repeatable)")
      ->group(group)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  generate
      .add_option("--max-new-tokens", flags.max_new_tokens,
                  "tokens to draw per prompt (default 64, fewer when the model's context is shorter)")
      ->group(group);
  generate
      .add_option("--batch-size", flags.batch_size,
                  "rows decoded together; the prompts repeat in turn to fill them (default: one per prompt)")
      ->group(group);
  generate.add_option("--temperature", flags.temperature, "0 = greedy (default); else sample from softmax(logits / T)")
      ->group(group);
  generate.add_option("--top-k", flags.top_k, "sample among the k likeliest tokens; 0 = all (default)")->group(group);
  generate
      .add_option("--top-p", flags.top_p,
                  "sample among the likeliest tokens holding this probability; 1 = all "
                  "(default)")
      ->group(group);
  generate
      .add_option("--stop-token", flags.stop_tokens,
                  "a token id that ends a row (repeatable); default: the "
                  "model's end-of-sequence tokens")
      ->group(group)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  generate.add_flag("--ignore-eos", flags.ignore_eos, "draw --max-new-tokens tokens whatever they are")->group(group);
}

/// bench's own flags into the command line, checked.
void take_bench_flags(const FlagSet& flags, CommandLine& result) {
  if (!flags.impls.empty()) result.impls = flags.impls;
  result.bench_iters = flags.bench_iters;
  result.bench_warmup = flags.bench_warmup;
  if (result.bench_iters < 1 || result.bench_warmup < 0) {
    fail_with({"--bench-iters must be >= 1 and --bench-warmup >= 0, got " + std::to_string(result.bench_iters) +
               " and " + std::to_string(result.bench_warmup) + "; fix: e.g. --bench-iters 20 --bench-warmup 5"});
  }
  result.profile_iterations = flags.profile_iterations;
  if (result.profile_iterations < 0) {
    fail_with({"--profile-iterations must be >= 0, got " + std::to_string(result.profile_iterations) +
               "; fix: e.g. --profile-iterations 2, or leave it out"});
  }
  result.bench_decode = flags.bench_decode;
  if (!flags.decode_batches.empty()) result.decode_batches = flags.decode_batches;
  if (!flags.decode_scopes.empty()) result.decode_scopes = flags.decode_scopes;
  for (const auto& scope : result.decode_scopes) {
    if (!config::parse_inference_cuda_graph_scope(scope)) {
      fail_with({"--decode-scopes holds '" + scope + "'; fix: use none, layer and block, comma-separated"});
    }
  }
  result.decode_prompt_tokens = flags.decode_prompt_tokens;
  result.decode_new_tokens = flags.decode_new_tokens;
  const bool bad_batch =
      std::any_of(result.decode_batches.begin(), result.decode_batches.end(), [](int64_t b) { return b < 1; });
  if (bad_batch || result.decode_prompt_tokens < 1 || result.decode_new_tokens < 2) {
    fail_with({"--decode-batches must be >= 1 each, --decode-prompt-tokens >= 1 and --decode-new-tokens >= 2, got " +
               bracketed(result.decode_batches) + ", " + std::to_string(result.decode_prompt_tokens) + " and " +
               std::to_string(result.decode_new_tokens) +
               "; fix: e.g. --decode-batches 1,8,32 --decode-prompt-tokens 32 "
               "--decode-new-tokens 128"});
  }
}

/// One problem per unknown argument a command was given.
std::vector<std::string> unknown_argument_problems(const std::vector<std::string>& extras, const std::string& command,
                                                   const std::map<std::string, CLI::App*>& subcommands) {
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < extras.size(); ++i) {
    problems.push_back(unknown_argument_message(extras[i], command, subcommands, runs_a_model(command)));
    // "--num-layer 4": the 4 belongs to the unknown flag; report the flag only.
    const bool flag_without_value = extras[i].rfind("--", 0) == 0 && extras[i].find('=') == std::string::npos;
    if (flag_without_value && i + 1 < extras.size() && extras[i + 1].rfind("--", 0) != 0) ++i;
  }
  return problems;
}

// ---- report: `graphed report INPUT... [-o FILE]`, parsed on its own (no settings flags) ----

std::string report_usage_fix() {
  return "fix: graphed report RUN_DIR|METRICS.jsonl|BENCH.json [more ...] -o report.html (see graphed report --help)";
}

CommandLine parse_report_command(const std::vector<std::string>& arguments) {
  CommandLine result;
  result.command = "report";
  CLI::App app{
      "graphed report: one self-contained HTML page (inline SVG) with loss, validation loss, learning rate, "
      "grad norm and tokens/s per iteration of each training run overlaid, and ms/iter bars and memory "
      "tables of each bench file.\nAn input is a folder holding metrics.jsonl, a file written by "
      "graphed train --metrics-file, or a JSON array printed by graphed bench --json or "
      "bench/reference_pytorch.py --json (told apart by a leading '[').",
      "graphed report"};
  app.allow_extras();
  app.add_option("inputs", result.report_inputs, "RUN_DIR, METRICS.jsonl or BENCH.json, one or more");
  app.add_option("-o,--output", result.report_output, "the HTML file to write (default report.html)");
  if (!parse_own_flags(app, arguments, result, report_usage_fix())) return result;
  std::vector<std::string> problems;
  for (const auto& extra : app.remaining()) {
    problems.push_back("unknown flag '" + extra + "' for graphed report; " + report_usage_fix());
  }
  if (result.report_inputs.empty())
    problems.push_back("graphed report needs at least one input; " + report_usage_fix());
  if (!problems.empty()) fail_with(problems);
  return result;
}

}  // namespace

void fail_with(const std::vector<std::string>& problems) {
  throw ConfigError(problems.size() == 1 ? problems.front()
                                         : "invalid command line (" + std::to_string(problems.size()) + " problems)",
                    problems);
}

bool parse_own_flags(CLI::App& app, const std::vector<std::string>& arguments, CommandLine& result,
                     const std::string& usage_fix) {
  std::vector<std::string> reversed(arguments.rbegin(), arguments.rend() - 1);  // without the command's name
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    result.early_output = app.help();
    return false;
  } catch (const CLI::ParseError& error) {
    fail_with({std::string(error.what()) + "; " + usage_fix});
  }
  return true;
}

namespace {

/// A command's flags: the settings flags it takes, then its own. report and tokenize parse their own
/// flags (parse_report_command, parse_tokenize_command), so they get none here.
void add_command_flags(CLI::App& sub, const std::string& name, FlagSet& flags, CommandLine& result) {
  if (name == "report" || name == "tokenize") return;
  add_setting_flags(sub, flags, name);
  if (name == "bench") {
    add_bench_flags(sub, flags);
    add_serve_bench_flags(sub, result.serve_bench);
    sub.add_option("--hf", result.generate.hf_folder,
                   "bench --serve: a Hugging Face model folder to serve "
                   "(instead of --load or the preset's random weights)")
        ->group("Serving benchmark (bench --serve)");
  }
  if (name == "generate") add_generate_flags(sub, result.generate);
  if (name == "serve") {
    add_model_flags(sub, result.generate, "Model and device");
    add_server_flags(sub, result.server);
  }
  if (name == "bench" || name == "serve") {
    sub.add_flag("--disable-custom-all-reduce", result.disable_custom_all_reduce,
                 "tensor-parallel decoding: sum "
                 "through NCCL instead of the one-shot peer-memory all-reduce (vLLM's name)");
  }
  if (name != "train" && name != "check-config") add_serving_flags(sub, result.serving);
}

}  // namespace

const std::vector<std::string>& command_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const auto& command : commands()) list.push_back(command.name);
    return list;
  }();
  return names;
}

CommandLine parse_command_line(const std::vector<std::string>& arguments) {
  if (!arguments.empty() && arguments.front() == "report") return parse_report_command(arguments);
  if (!arguments.empty() && arguments.front() == "tokenize") return parse_tokenize_command(arguments);
  CommandLine result;
  CLI::App app{"graphed: train and serve transformer models with CUDA graphs, Megatron-LM flags", "graphed"};
  app.set_version_flag("--version", build_summary());
  app.allow_extras();
  std::map<std::string, FlagSet> flag_sets;
  std::map<std::string, CLI::App*> subcommands;
  for (const auto& command : commands()) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    sub->allow_extras();
    subcommands[command.name] = sub;
    add_command_flags(*sub, command.name, flag_sets[command.name], result);
  }
  std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    const bool for_command = !arguments.empty() && subcommands.count(arguments.front()) > 0;
    result.early_output = help_with_lists(app, preset_argument(arguments), for_command ? arguments.front() : "");
    return result;
  } catch (const CLI::CallForVersion&) {
    result.early_output = build_summary() + "\n";
    return result;
  } catch (const CLI::ParseError& error) {
    const bool in_command = !arguments.empty() && subcommands.count(arguments.front()) > 0;
    fail_with(
        {std::string(error.what()) + "; fix: see graphed " + (in_command ? arguments.front() + " " : "") + "--help"});
  }
  CLI::App* chosen = nullptr;
  for (const auto& [name, sub] : subcommands) {
    if (sub->parsed()) {
      chosen = sub;
      result.command = name;
    }
  }
  if (chosen == nullptr) {
    const auto extras = app.remaining();
    if (!extras.empty() && extras.front().rfind("-", 0) != 0) {
      std::string message = "unknown command '" + extras.front() + "'";
      if (const auto near = nearest_match(extras.front(), command_names())) message += " (did you mean " + *near + "?)";
      fail_with({message + "; fix: use one of " + join(command_names(), ", ")});
    }
    if (!extras.empty()) fail_with({unknown_argument_message(extras.front(), "", subcommands, false)});
    result.early_output = help_with_lists(app, std::nullopt, "");
    result.exit_code = arguments.empty() ? 1 : 0;
    return result;
  }
  std::vector<std::string> problems = unknown_argument_problems(chosen->remaining(), result.command, subcommands);
  const FlagSet& flags = flag_sets[result.command];
  json flag_values = collect_flag_values(flags, problems);
  if (!flags.preset.empty()) {
    if (!config::preset_settings(flags.preset)) problems.push_back(unknown_preset_message(flags.preset));
    result.preset = flags.preset;
  }
  if (!problems.empty()) fail_with(problems);
  if (result.preset) result.sources.push_back({"preset " + *result.preset, *config::preset_settings(*result.preset)});
  if (!flags.config_file.empty()) {
    result.config_file = flags.config_file;
    result.sources.push_back({"--config " + flags.config_file, config::read_config_file(flags.config_file)});
  }
  result.sources.push_back({"command line", flag_values});
  for (const auto& source : result.sources) {
    config::apply_settings(result.settings, source.values, source.name, &result.origins);
  }
  result.json_output = flags.json_output;
  take_bench_flags(flags, result);
  result.debug_channels = flags.debug_channels;
  return result;
}

}  // namespace graphed::cli
