// cli/command_line.h — turns argv into a command and its Settings: `graphed <command> [flags]`.
// Flags come from config/settings.h's table (dash and underscore spellings, --no-X for booleans,
// comma lists), applied over --preset and --config in that order. The only code that reads argv.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graphed/cli/server_flags.h"
#include "graphed/cli/serving_flags.h"
#include "graphed/config/settings.h"

namespace CLI {
class App;
}

namespace graphed::cli {

/// One layer of settings as given: "preset tiny", "--config run.json" or "command line".
struct SettingSource {
  std::string name;
  nlohmann::json values;  ///< key -> checked value
};

/// `graphed generate`'s own flags (the model comes from --load or --hf, not from settings flags).
struct GenerateFlags {
  std::string hf_folder;                  ///< --hf DIR: a Hugging Face model folder
  std::vector<std::string> prompts;       ///< --prompt TEXT, repeatable: one prompt each
  std::vector<std::string> prompt_files;  ///< --prompt-file F, repeatable: each file is one prompt
  std::vector<std::string> prompt_ids;    ///< --prompt-ids "1 2 3", repeatable: token ids, one prompt each
  std::optional<int64_t> max_new_tokens;  ///< --max-new-tokens; unset = 64, or what the context leaves
  std::optional<int64_t> batch_size;      ///< --batch-size: rows decoded together; unset = one per prompt
  double temperature = 0.0;               ///< --temperature: 0 = greedy
  int64_t top_k = 0;                      ///< --top-k: 0 = all
  double top_p = 1.0;                     ///< --top-p: 1 = all
  std::string tokenizer;                  ///< --tokenizer PATH|bytes; unset = the model's own
  std::string dtype = "auto";             ///< --dtype auto|bf16|fp16|fp32
  std::vector<int64_t> stop_tokens;       ///< --stop-token ID, repeatable; unset = the model's end tokens
  bool ignore_eos = false;                ///< --ignore-eos: draw max-new-tokens tokens whatever comes
};

struct CommandLine {
  std::string command;                      ///< "check-config", ... ; empty when only help/version
  config::Settings settings;                ///< defaults <- preset <- config file <- flags
  std::vector<SettingSource> sources;       ///< the layers of `settings`, lowest precedence first
  config::SettingOrigins origins;           ///< where each explicitly given setting came from
  std::optional<std::string> preset;        ///< --preset NAME
  std::optional<std::string> config_file;   ///< --config FILE
  bool json_output = false;                 ///< --json
  std::vector<std::string> debug_channels;  ///< --debug CHANNEL (repeatable)
  // bench only.
  std::vector<std::string> impls{"none"};         ///< --impls none[,local,...]: one row each
  int64_t bench_iters = 20;                       ///< --bench-iters: timed iterations per impl
  int64_t bench_warmup = 5;                       ///< --bench-warmup: untimed iterations first
  int64_t profile_iterations = 0;                 ///< --profile-iterations: iterations inside a profiler range
  bool bench_decode = false;                      ///< --decode: time decoding per inference graph scope instead
  std::vector<int64_t> decode_batches{1, 8, 32};  ///< --decode-batches: one row per scope and batch
  std::vector<std::string> decode_scopes{"none", "layer", "block"};  ///< --decode-scopes
  int64_t decode_prompt_tokens = 32;                                 ///< --decode-prompt-tokens: random prompt length
  int64_t decode_new_tokens = 128;                                   ///< --decode-new-tokens: tokens drawn per prompt
  // bench --decode and serve with tensor parallelism.
  bool disable_custom_all_reduce = false;  ///< --disable-custom-all-reduce: NCCL sums in place of peer memory
  // generate (hf_folder also for bench --serve; hf_folder, tokenizer and dtype also for serve).
  GenerateFlags generate;
  // serve only.
  ServerFlags server;
  // generate and bench --serve.
  ServingFlags serving;
  ServeBenchFlags serve_bench;
  // report only (it takes no settings flags).
  std::vector<std::string> report_inputs;     ///< RUN_DIR | METRICS.jsonl | BENCH.json, one or more
  std::string report_output = "report.html";  ///< -o/--output
  // tokenize only (it takes no settings flags; parsed by cli/tokenize_command.cpp).
  std::string tokenizer_path;             ///< --tokenizer: tokenizer.json, a vocab folder, or "bytes"
  std::optional<std::string> input_text;  ///< --text
  std::optional<std::string> input_file;  ///< --file ("-": standard input)
  bool decode_ids = false;                ///< --decode: the input holds ids; print their text
  bool add_special_tokens = true;         ///< --no-special-tokens clears it
  /// Set when the command line asked for text instead of work (--help, --version, no command):
  /// print it to stdout and exit with exit_code.
  std::optional<std::string> early_output;
  int exit_code = 0;
};

/// Parses the arguments (without the program name). Throws ConfigError for an unknown command or
/// flag (naming the nearest valid one), a missing or bad value, an unknown preset or a bad config
/// file; every problem found is listed in ConfigError::details().
CommandLine parse_command_line(const std::vector<std::string>& arguments);

/// Throws ConfigError carrying every problem: one problem as its message, several under a count.
[[noreturn]] void fail_with(const std::vector<std::string>& problems);

/// Parses a command that takes its own flags and no settings (report, tokenize): `app` over the
/// arguments after the command's name. Returns false when --help was asked (result.early_output then
/// holds the help); a CLI11 parse error throws ConfigError ending in "; " + usage_fix.
bool parse_own_flags(CLI::App& app, const std::vector<std::string>& arguments, CommandLine& result,
                     const std::string& usage_fix);

/// The commands graphed knows, in help order.
const std::vector<std::string>& command_names();

}  // namespace graphed::cli
