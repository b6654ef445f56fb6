// cli/generate_command.cpp — see cli/generate_command.h.
#include "graphed/cli/generate_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "graphed/cli/draft_model.h"
#include "graphed/cli/engine_report.h"
#include "graphed/cli/generate_setup.h"
#include "graphed/cli/quantization.h"
#include "graphed/cli/run_setup.h"
#include "graphed/cli/serving_flags.h"
#include "graphed/infer/serving_engine.h"
#include "graphed/runtime/device.h"
#include "graphed/tokenizer/stream_decoder.h"
#include "graphed/util/error.h"
#include "graphed/util/text.h"

namespace graphed::cli {
namespace {

const char* dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16: return "bf16";
    case at::kHalf: return "fp16";
    default: return "fp32";
  }
}

std::string milliseconds(double value) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(value < 10 ? 3 : 1) << value << " ms";
  return text.str();
}

void check_flags(const GenerateFlags& flags, int64_t prompt_count) {
  std::vector<std::string> problems;
  if (flags.max_new_tokens && *flags.max_new_tokens < 1) {
    problems.push_back("--max-new-tokens is " + std::to_string(*flags.max_new_tokens) + "; fix: give 1 or more");
  }
  if (flags.batch_size && *flags.batch_size < prompt_count) {
    problems.push_back("--batch-size " + std::to_string(*flags.batch_size) + " is smaller than the " +
                       std::to_string(prompt_count) + " prompts given; fix: raise --batch-size or give fewer prompts");
  }
  if (!(flags.temperature >= 0.0) || !std::isfinite(flags.temperature)) {
    problems.push_back("--temperature is " + format_number(flags.temperature) +
                       "; fix: give 0 (greedy) or a positive number");
  }
  if (flags.top_k < 0) problems.push_back("--top-k is " + std::to_string(flags.top_k) + "; fix: give 0 (all) or more");
  if (!(flags.top_p > 0.0 && flags.top_p <= 1.0)) {
    problems.push_back("--top-p is " + format_number(flags.top_p) + "; fix: give a value in (0, 1]");
  }
  if (problems.size() == 1) throw ConfigError(problems.front());
  if (!problems.empty())
    throw ConfigError("invalid generate flags (" + std::to_string(problems.size()) + " problems)", problems);
}

/// The rows to decode: the prompts repeated in turn up to --batch-size.
std::vector<std::vector<int64_t>> fill_rows(const std::vector<std::vector<int64_t>>& prompts,
                                            std::optional<int64_t> batch) {
  std::vector<std::vector<int64_t>> rows;
  const auto count = static_cast<std::size_t>(batch.value_or(static_cast<int64_t>(prompts.size())));
  for (std::size_t i = 0; i < count; ++i) rows.push_back(prompts[i % prompts.size()]);
  return rows;
}

/// --max-new-tokens, or 64 cut to what the model's context leaves after the longest prompt.
int64_t new_token_count(const GenerateFlags& flags, int64_t longest, int64_t context) {
  if (flags.max_new_tokens) return *flags.max_new_tokens;
  const int64_t count = std::min<int64_t>(64, context - longest);
  if (count < 1) return 64;  // no room at all: the context check below says so
  if (count < 64)
    std::cerr << "note: drawing " << count << " new tokens, what the model's context of " << context
              << " leaves after the prompt (pass --max-new-tokens to choose)\n";
  return count;
}

infer::ServingOptions engine_options(const CommandLine& command_line, const config::CudaGraphConfig& graphs,
                                     const GenerationModel& model, const std::vector<std::vector<int64_t>>& rows) {
  // Without --inference-max-requests every prompt runs at once, up to 64 (more take their turns).
  infer::ServingOptions options =
      serving_options(command_line.serving, graphs, std::min<int64_t>(64, static_cast<int64_t>(rows.size())));
  if (!command_line.serving.max_sequence) options.max_sequence = model.context;
  // A model's vocabulary may be padded past its tokenizer's (Megatron pads it; a byte-level checkpoint
  // has --vocab-size rows and 256 bytes): ids the tokenizer cannot decode are never drawn.
  if (model.tokenizer) options.vocabulary = model.tokenizer->vocab_size();
  return options;
}

/// Each row's request: the sampling flags with a seed of its own (the run's seed + the row), so that
/// repeated prompts draw different samples and a run repeats with its --seed.
infer::RequestOptions request_options(const CommandLine& command_line, const GenerationModel& model, int64_t row,
                                      int64_t new_tokens) {
  const GenerateFlags& flags = command_line.generate;
  infer::RequestOptions options;
  options.max_new_tokens = new_tokens;
  options.sampling.temperature = flags.temperature;
  options.sampling.top_k = flags.top_k;
  options.sampling.top_p = flags.top_p;
  options.sampling.seed = static_cast<uint64_t>(command_line.settings.train.seed) + static_cast<uint64_t>(row);
  if (!flags.ignore_eos) options.stop_tokens = flags.stop_tokens.empty() ? model.end_tokens : flags.stop_tokens;
  return options;
}

/// Refuses, before any work, the prompts the engine would refuse: one line each, with the flag to change (the
/// rows repeat the prompts, so the first of each is asked).
void refuse_prompts_that_cannot_run(const infer::ServingEngine& engine, const CommandLine& command_line,
                                    const GenerationModel& model, const std::vector<std::vector<int64_t>>& rows,
                                    std::size_t prompt_count, int64_t new_tokens) {
  std::vector<std::string> problems;
  const std::size_t checked = std::min(prompt_count, rows.size());
  for (std::size_t row = 0; row < checked; ++row) {
    const auto refused =
        engine.rejection(rows[row], request_options(command_line, model, static_cast<int64_t>(row), new_tokens));
    if (!refused) continue;
    const std::string label =
        checked > 1 ? "prompt " + std::to_string(row + 1) + " of " + std::to_string(checked) + ": " : "";
    problems.push_back(label + refused->problem + "; fix: " + refusal_fix(*refused, "--max-new-tokens"));
  }
  if (problems.size() == 1) throw ConfigError(problems.front());
  if (!problems.empty()) {
    throw ConfigError(std::to_string(problems.size()) + " of " + std::to_string(checked) + " prompts cannot run",
                      problems);
  }
}

std::string decode_text(const tokenizer::Tokenizer* tokenizer, const std::vector<int64_t>& ids) {
  return tokenizer ? tokenizer->decode(ids) : bracketed(ids);
}

/// What a run produced and how long it took, request by request (in row order).
struct Completions {
  std::vector<infer::FinishedRequest> finished;  ///< by row
  double first_token_ms = 0;                     ///< from the first step to the first token drawn
  double seconds = 0;                            ///< from the first step to the last
  int64_t output_tokens = 0;
};

/// Runs every row through the engine; `on_token` sees each token as it is drawn.
Completions serve_rows(infer::ServingEngine& engine, const CommandLine& command_line, const GenerationModel& model,
                       const std::vector<std::vector<int64_t>>& rows, int64_t new_tokens,
                       const std::function<void(int64_t row, int64_t token)>& on_token) {
  std::map<int64_t, std::size_t> row_of;
  for (std::size_t row = 0; row < rows.size(); ++row) {
    const auto options = request_options(command_line, model, static_cast<int64_t>(row), new_tokens);
    row_of[engine.add_request(rows[row], options)] = row;
  }
  Completions result;
  result.finished.resize(rows.size());
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  while (engine.has_work()) {
    const infer::StepResult step = engine.step();
    for (const auto& token : step.tokens) {
      if (result.output_tokens++ == 0) result.first_token_ms = elapsed_ms();
      if (on_token) on_token(static_cast<int64_t>(row_of.at(token.request)), token.token);
    }
    for (const auto& done : step.finished) result.finished[row_of.at(done.request)] = done;
  }
  result.seconds = elapsed_ms() / 1000.0;
  return result;
}

double tokens_per_second(const Completions& completions) {
  return completions.seconds > 0 ? static_cast<double>(completions.output_tokens) / completions.seconds : 0.0;
}

void print_json(const GenerationModel& model, const config::CudaGraphConfig& graphs, const infer::ServingEngine& engine,
                const std::vector<std::vector<int64_t>>& rows, const Completions& completions, std::ostream& out) {
  nlohmann::json result;
  result["model"] = model.description;
  result["scope"] = config::to_string(graphs.inference_scope);
  result["requests"] = rows.size();
  result["engine"] = engine_json(engine, engine.stats());
  result["time_to_first_token_ms"] = completions.first_token_ms;
  result["seconds"] = completions.seconds;
  result["output_tokens"] = completions.output_tokens;
  result["tokens_per_second"] = tokens_per_second(completions);
  nlohmann::json items = nlohmann::json::array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const infer::FinishedRequest& done = completions.finished[i];
    nlohmann::json item{{"prompt_ids", rows[i]},
                        {"ids", done.tokens},
                        {"finish_reason", infer::to_string(done.reason)},
                        {"stopped", done.reason == infer::FinishReason::kStopToken}};
    if (!done.message.empty()) item["message"] = done.message;
    if (model.tokenizer) item["text"] = model.tokenizer->decode(done.tokens);
    items.push_back(item);
  }
  result["completions"] = items;
  out << result.dump(2) << std::endl;
}

void print_summary(const config::CudaGraphConfig& graphs, const infer::ServingEngine& engine,
                   const Completions& completions, std::ostream& out) {
  const infer::EngineStats& stats = engine.stats();
  out << "first token after " << milliseconds(completions.first_token_ms) << "; "
      << counted(static_cast<std::size_t>(completions.output_tokens), "token") << " in "
      << milliseconds(completions.seconds * 1000.0) << " (" << group_thousands(tokens_per_second(completions))
      << " tokens/s), " << counted(static_cast<std::size_t>(stats.steps), "step") << std::endl;
  print_engine_line(engine, stats, out);
}

void print_texts(const GenerationModel& model, const std::vector<std::vector<int64_t>>& rows,
                 const Completions& completions, std::ostream& out) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const infer::FinishedRequest& done = completions.finished[i];
    if (done.reason == infer::FinishReason::kRejected) {
      out << "--- " << i + 1 << " (refused: " << done.message << ") ---\n";
      continue;
    }
    out << "--- " << i + 1 << (done.reason == infer::FinishReason::kStopToken ? " (stopped at an end token)" : "")
        << " ---\n"
        << decode_text(model.tokenizer.get(), rows[i]) << decode_text(model.tokenizer.get(), done.tokens) << "\n";
  }
  out << "---" << std::endl;
}

}  // namespace

int run_generate(const CommandLine& command_line, std::ostream& out) {
  const GenerateFlags& flags = command_line.generate;
  refuse_multi_process_launch("generate");
  const at::Device device = choose_device(command_line.settings.train.device, "decoding eagerly in fp32");
  check_quantization(command_line.serving.quantization);
  const config::CudaGraphConfig graphs = resolve_decode_graphs(command_line, device, std::cerr);
  GenerationModel model = load_generation_model(command_line, device, std::cerr);
  {
    const at::NoGradGuard no_grad;
    apply_quantization(command_line.serving.quantization, model.model, device, std::cerr);
  }
  const at::ScalarType dtype = model.model->parameters().at(0).scalar_type();
  const auto prompts = read_prompts(flags, model.tokenizer.get());
  check_flags(flags, static_cast<int64_t>(prompts.size()));
  const auto rows = fill_rows(prompts, flags.batch_size);
  std::size_t longest = 0;
  for (const auto& row : rows) longest = std::max(longest, row.size());
  const int64_t new_tokens = new_token_count(flags, static_cast<int64_t>(longest), model.context);
  infer::ServingOptions options = engine_options(command_line, graphs, model, rows);
  attach_draft_model(options, command_line, device, model.tokenizer.get(), model.model->config().vocab_size, std::cerr);
  infer::ServingEngine engine(model.model, device, std::move(options));
  refuse_prompts_that_cannot_run(engine, command_line, model, rows, prompts.size(), new_tokens);
  if (!command_line.json_output) {
    out << "model: " << model.description << " on " << runtime::device_name(device) << ", " << dtype_name(dtype)
        << (model.tokenizer ? "; tokenizer: " + model.tokenizer->description() : "") << std::endl;
  }
  engine.capture_graphs({infer::sampling_mode_of(request_options(command_line, model, 0, new_tokens).sampling)});
  const bool stream = !command_line.json_output && rows.size() == 1 && model.tokenizer && &out == &std::cout &&
                      ::isatty(::fileno(stdout)) != 0;
  std::optional<tokenizer::StreamDecoder> streamer;
  if (stream) {
    streamer.emplace(*model.tokenizer);
    out << model.tokenizer->decode(rows[0]) << std::flush;
  }
  const auto on_token = [&](int64_t, int64_t token) {
    if (streamer) out << streamer->push(token) << std::flush;
  };
  const Completions completions = serve_rows(engine, command_line, model, rows, new_tokens, on_token);
  const bool refused = std::any_of(completions.finished.begin(), completions.finished.end(),
                                   [](const auto& done) { return done.reason == infer::FinishReason::kRejected; });
  if (command_line.json_output) {
    print_json(model, graphs, engine, rows, completions, out);
  } else {
    if (streamer && !refused) {
      out << streamer->finish() << std::endl;
    } else {
      print_texts(model, rows, completions, out);
    }
    print_summary(graphs, engine, completions, out);
  }
  if (!refused) return 0;
  std::cerr << "error: the engine refused some prompts (see above); fix: change each as its refusal says" << std::endl;
  return 1;
}

}  // namespace graphed::cli
