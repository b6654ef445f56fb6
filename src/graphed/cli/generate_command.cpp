// cli/generate_command.cpp — see cli/generate_command.h.
#include "graphed/cli/generate_command.h"

#include <unistd.h>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "graphed/cli/generate_setup.h"
#include "graphed/cli/run_setup.h"
#include "graphed/infer/decode_engine.h"
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

std::string mebibytes(int64_t bytes) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return text.str();
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
    problems.push_back("--temperature is " + format_number(flags.temperature) + "; fix: give 0 (greedy) or a positive number");
  }
  if (flags.top_k < 0) problems.push_back("--top-k is " + std::to_string(flags.top_k) + "; fix: give 0 (all) or more");
  if (!(flags.top_p > 0.0 && flags.top_p <= 1.0)) {
    problems.push_back("--top-p is " + format_number(flags.top_p) + "; fix: give a value in (0, 1]");
  }
  if (problems.size() == 1) throw ConfigError(problems.front());
  if (!problems.empty()) throw ConfigError("invalid generate flags (" + std::to_string(problems.size()) + " problems)", problems);
}

/// The rows to decode: the prompts repeated in turn up to --batch-size.
std::vector<std::vector<int64_t>> fill_rows(const std::vector<std::vector<int64_t>>& prompts, std::optional<int64_t> batch) {
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
  if (count < 64) std::cerr << "note: drawing " << count << " new tokens, what the model's context of " << context
                            << " leaves after the prompt (pass --max-new-tokens to choose)\n";
  return count;
}

infer::EngineOptions engine_options(const CommandLine& command_line, const config::CudaGraphConfig& graphs,
                                    const GenerationModel& model, const std::vector<std::vector<int64_t>>& rows) {
  const GenerateFlags& flags = command_line.generate;
  std::size_t longest = 0;
  for (const auto& row : rows) longest = std::max(longest, row.size());
  infer::EngineOptions options;
  options.scope = graphs.inference_scope;
  options.num_cuda_graphs = graphs.inference_num_cuda_graphs;
  options.max_batch = static_cast<int64_t>(rows.size());
  options.max_new_tokens = new_token_count(flags, static_cast<int64_t>(longest), model.context);
  const int64_t needed = static_cast<int64_t>(longest) + options.max_new_tokens;
  if (needed > model.context) {
    throw DataError("the longest prompt has " + std::to_string(longest) + " tokens, and with " +
                    std::to_string(options.max_new_tokens) + " new tokens that is " + std::to_string(needed) +
                    " positions, more than the model's context of " + std::to_string(model.context) +
                    "; fix: shorten the prompt or lower --max-new-tokens");
  }
  options.max_sequence = needed;
  options.sampling.temperature = flags.temperature;
  options.sampling.top_k = flags.top_k;
  options.sampling.top_p = flags.top_p;
  options.sampling.seed = static_cast<uint64_t>(command_line.settings.train.seed);
  // A model's vocabulary may be padded past its tokenizer's (Megatron pads it; a byte-level checkpoint
  // has --vocab-size rows and 256 bytes): ids the tokenizer cannot decode are never drawn.
  if (model.tokenizer) options.sampling.vocabulary = model.tokenizer->vocab_size();
  if (!flags.ignore_eos) options.stop_tokens = flags.stop_tokens.empty() ? model.end_tokens : flags.stop_tokens;
  return options;
}

std::string decode_text(const tokenizer::Tokenizer* tokenizer, const std::vector<int64_t>& ids) {
  return tokenizer ? tokenizer->decode(ids) : bracketed(ids);
}

struct Timing {
  double tokens_per_second = 0;  ///< decode steps' tokens of the real rows per second
  double step_ms = 0;
};

Timing timing_of(const infer::Generation& generation, int64_t real_rows) {
  Timing timing;
  if (generation.decode_steps > 0) {
    timing.step_ms = generation.decode_ms / static_cast<double>(generation.decode_steps);
    timing.tokens_per_second = static_cast<double>(real_rows * generation.decode_steps) / (generation.decode_ms / 1000.0);
  }
  return timing;
}

void print_json(const GenerationModel& model, const config::CudaGraphConfig& graphs, const infer::DecodeEngine& engine,
                const std::vector<std::vector<int64_t>>& rows, const infer::Generation& generation, std::ostream& out) {
  nlohmann::json result;
  result["model"] = model.description;
  result["scope"] = config::to_string(graphs.inference_scope);
  result["rows"] = generation.rows;
  result["graphed"] = generation.graphed;
  result["buckets"] = engine.buckets();
  result["time_to_first_token_ms"] = generation.time_to_first_token_ms;
  result["decode_steps"] = generation.decode_steps;
  result["decode_ms"] = generation.decode_ms;
  const Timing timing = timing_of(generation, static_cast<int64_t>(rows.size()));
  result["ms_per_step"] = timing.step_ms;
  result["tokens_per_second"] = timing.tokens_per_second;
  result["cache_bytes"] = engine.cache().bytes();
  nlohmann::json captures = nlohmann::json::array();
  for (const auto& capture : engine.captures()) {
    captures.push_back({{"rows", capture.rows}, {"graphs", capture.graphs}, {"seconds", capture.seconds},
                        {"pool_bytes", capture.memory.pool_bytes}, {"graph_bytes", capture.memory.graph_bytes}});
  }
  result["captures"] = captures;
  nlohmann::json completions = nlohmann::json::array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    nlohmann::json item{{"prompt_ids", rows[i]}, {"ids", generation.tokens[i]}, {"stopped", static_cast<bool>(generation.stopped[i])}};
    if (model.tokenizer) item["text"] = model.tokenizer->decode(generation.tokens[i]);
    completions.push_back(item);
  }
  result["completions"] = completions;
  out << result.dump(2) << std::endl;
}

void print_summary(const config::CudaGraphConfig& graphs, const infer::DecodeEngine& engine,
                   const infer::Generation& generation, int64_t real_rows, std::ostream& out) {
  const Timing timing = timing_of(generation, real_rows);
  out << "time to first token " << milliseconds(generation.time_to_first_token_ms) << "; " << generation.decode_steps
      << " decode steps in " << milliseconds(generation.decode_ms) << " (" << milliseconds(timing.step_ms) << " per step, "
      << group_thousands(timing.tokens_per_second) << " tokens/s for " << counted(static_cast<std::size_t>(real_rows), "row")
      << ")" << std::endl;
  std::string decode = generation.graphed ? "graphs at " + config::to_string(graphs.inference_scope) + " scope" : "eager";
  if (!generation.graphed && graphs.inference_scope != config::InferenceCudaGraphScope::kNone) {
    decode += " (the batch is larger than the largest bucket)";
  }
  out << "decode: " << decode << ", batch of " << real_rows << " on " << generation.rows << " rows";
  if (!engine.buckets().empty()) out << " (buckets " << bracketed(engine.buckets()) << ")";
  out << "; cache " << mebibytes(engine.cache().bytes()) << std::endl;
  for (const auto& capture : engine.captures()) {
    out << "captured bucket " << capture.rows << ": " << counted(static_cast<std::size_t>(capture.graphs), "graph") << " in "
        << milliseconds(capture.seconds * 1000.0) << ", graph pool " << mebibytes(capture.memory.pool_bytes)
        << ", graph objects " << mebibytes(capture.memory.graph_bytes) << std::endl;
  }
}

}  // namespace

int run_generate(const CommandLine& command_line, std::ostream& out) {
  const GenerateFlags& flags = command_line.generate;
  refuse_multi_process_launch("generate");
  const at::Device device = choose_device(command_line.settings.train.device, "decoding eagerly in fp32");
  const config::CudaGraphConfig graphs = resolve_decode_graphs(command_line, device, std::cerr);
  GenerationModel model = load_generation_model(command_line, device, std::cerr);
  const at::ScalarType dtype = model.model->parameters().at(0).scalar_type();
  const auto prompts = read_prompts(flags, model.tokenizer.get());
  check_flags(flags, static_cast<int64_t>(prompts.size()));
  const auto rows = fill_rows(prompts, flags.batch_size);
  if (!command_line.json_output) {
    out << "model: " << model.description << " on " << capture::device_name(device) << ", " << dtype_name(dtype)
        << (model.tokenizer ? "; tokenizer: " + model.tokenizer->description() : "") << std::endl;
  }
  infer::DecodeEngine engine(model.model, device, engine_options(command_line, graphs, model, rows));

  const bool stream = !command_line.json_output && rows.size() == 1 && model.tokenizer && &out == &std::cout &&
                      ::isatty(::fileno(stdout)) != 0;
  std::optional<tokenizer::StreamDecoder> streamer;
  if (stream) {
    streamer.emplace(*model.tokenizer);
    out << model.tokenizer->decode(rows[0]) << std::flush;
  }
  const auto on_step = [&](int64_t, const std::vector<int64_t>& tokens) {
    if (streamer && tokens[0] >= 0) out << streamer->push(tokens[0]) << std::flush;
  };
  const infer::Generation generation = engine.generate(rows, engine.options().max_new_tokens, on_step);
  if (command_line.json_output) {
    print_json(model, graphs, engine, rows, generation, out);
    return 0;
  }
  if (streamer) {
    out << streamer->finish() << std::endl;
  } else {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      out << "--- " << i + 1 << (generation.stopped[i] ? " (stopped at an end token)" : "") << " ---\n"
          << decode_text(model.tokenizer.get(), rows[i]) << decode_text(model.tokenizer.get(), generation.tokens[i]) << "\n";
    }
    out << "---" << std::endl;
  }
  print_summary(graphs, engine, generation, static_cast<int64_t>(rows.size()), out);
  return 0;
}

}  // namespace graphed::cli
