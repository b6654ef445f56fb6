// cli/generate_setup.cpp — see cli/generate_setup.h.
#include "graphed/cli/generate_setup.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "graphed/capture/graph_support.h"
#include "graphed/cli/run_setup.h"
#include "graphed/config/config_issue.h"
#include "graphed/hf/hf_model.h"
#include "graphed/train/checkpoint.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/text.h"

namespace graphed::cli {
namespace {

bool given(const CommandLine& command_line, const std::string& key) { return command_line.origins.count(key) > 0; }

/// Whether a checkpoint's run read text through the byte tokenizer (not a .bin token file or mock data).
bool trained_on_text(const config::TrainConfig& train) {
  if (train.mock_data) return false;
  if (!train.data_path) return true;  // the default corpus
  return is_directory(*train.data_path) || extension_of(*train.data_path) != ".bin";
}

std::unique_ptr<tokenizer::Tokenizer> tokenizer_from(const std::string& path, const std::string& flag) {
  try {
    return tokenizer::load_tokenizer(path);
  } catch (const DataError& error) {
    throw DataError(flag + ": " + error.what());
  }
}

GenerationModel load_checkpoint_model(const CommandLine& command_line, const at::Device& device, at::ScalarType dtype,
                                      std::ostream& notes) {
  CommandLine eager = command_line;  // the model resolves without the decode graph flags (checked on their own)
  eager.settings.cuda_graph = config::CudaGraphInputs{};
  for (auto& source : eager.sources) {
    for (const auto& spec : config::setting_specs()) {
      if (spec.section == "cuda_graph") source.values.erase(spec.key);
    }
  }
  const RunSettings run = settings_for_run(eager);
  for (const auto& note : run.notes) notes << "note: " << note << "\n";
  config::Settings settings = run.settings;
  settings.model.attention_dropout = 0.0;
  settings.model.hidden_dropout = 0.0;
  settings.model.fused_kernels = true;  // training's --no-fused-kernels does not carry to decoding
  // A dropless MoE decodes through the grouped GEMM whatever it trained with: the same experts' sums, but static
  // shapes, so the serving engine's graphs can hold it (the dispatch changes no weight).
  if (!settings.model.is_drop_and_pad()) settings.model.moe_grouped_gemm = true;
  settings.train.tensor_model_parallel_size = 1;  // loaded whole: a tensor-parallel server splits it afterwards
  settings.train.sequence_parallel = false;
  settings.train.expert_model_parallel_size = 1;  // every expert: a checkpoint holds them all
  settings.train.expert_tensor_parallel_size.reset();
  const config::RunConfig config = resolve_settings(settings);
  GenerationModel result;
  result.model = model::GptModel(config.model, config.moe_layers);
  const int64_t iteration = train::load_model_weights(*config.train.load, result.model, config);
  result.model->to(device, dtype);
  result.model->eval();
  result.description = "graphed checkpoint " + *config.train.load + " (iteration " + std::to_string(iteration) + ")";
  result.context = config.model.max_position_embeddings.value_or(config.model.seq_length);
  const std::string& flag = command_line.generate.tokenizer;
  if (!flag.empty()) {
    result.tokenizer = tokenizer_from(flag, "--tokenizer");
  } else if (trained_on_text(config.train)) {
    result.tokenizer = tokenizer::load_tokenizer("bytes");
  }
  if (result.tokenizer && result.tokenizer->vocab_size() > config.model.vocab_size) {
    throw ConfigError("the tokenizer has " + std::to_string(result.tokenizer->vocab_size()) +
                      " ids and the model only " + std::to_string(config.model.vocab_size) +
                      "; fix: pass the --tokenizer the model was trained with");
  }
  return result;
}

GenerationModel load_hf_folder(const CommandLine& command_line, const at::Device& device,
                               std::optional<at::ScalarType> dtype) {
  const std::string& folder = command_line.generate.hf_folder;
  hf::HfModel hf = hf::load_hf_model(folder, device, dtype);
  GenerationModel result;
  result.model = hf.model;
  result.model->eval();
  result.description = hf.architecture + " from " + folder;
  result.context = hf.config.max_position_embeddings.value_or(hf.config.seq_length);
  result.end_tokens = hf.eos_token_ids;
  const std::string& flag = command_line.generate.tokenizer;
  if (!flag.empty()) {
    result.tokenizer = tokenizer_from(flag, "--tokenizer");
  } else {
    const bool has_files =
        path_exists(join_path(folder, "tokenizer.json")) || path_exists(join_path(folder, "vocab.json"));
    if (has_files) result.tokenizer = tokenizer_from(folder, "--hf");
  }
  return result;
}

/// "1 2 3" or "1,2,3" -> ids.
std::vector<int64_t> parse_ids(const std::string& text) {
  std::string spaced = text;
  std::replace(spaced.begin(), spaced.end(), ',', ' ');
  std::vector<int64_t> ids;
  for (const auto& word : split(spaced, ' ')) {
    if (word.empty()) continue;
    std::size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    GRAPHED_CHECK(used == word.size() && value >= 0, DataError, "--prompt-ids '", text, "' holds '", word,
                  "', not a token id; fix: give non-negative integers separated by spaces or commas");
    ids.push_back(value);
  }
  GRAPHED_CHECK(!ids.empty(), DataError, "--prompt-ids '", text,
                "' holds no token id; fix: give e.g. --prompt-ids \"1 2 3\"");
  return ids;
}

}  // namespace

config::CudaGraphConfig resolve_decode_graphs(const CommandLine& command_line, const at::Device& device,
                                              std::ostream& notes) {
  config::CudaGraphInputs inputs = command_line.settings.cuda_graph;
  const bool impl_given = given(command_line, "cuda_graph_impl") || given(command_line, "cuda_graph_scope") ||
                          given(command_line, "enable_cuda_graph") || given(command_line, "external_cuda_graph");
  const bool scope_given = given(command_line, "inference_cuda_graph_scope");
  if (!impl_given && !scope_given && device.is_cuda()) {
    inputs.impl = "local";
    inputs.inference_scope = "block";
  } else if (!impl_given && scope_given && inputs.inference_scope != "none") {
    inputs.impl = "local";
    notes << "note: decode graphs are the local implementation's (Megatron's rule TC-5): taking --cuda-graph-impl "
             "local\n";
  }
  config::IssueList issues;
  const config::CudaGraphConfig graphs = config::migrate_cuda_graph_inputs(inputs, issues);
  for (const auto& line : issues.formatted(config::Severity::kWarning)) notes << line << "\n";
  issues.throw_errors("invalid decode graph settings");
  const auto why_not = capture::why_graphs_cannot_run(device);
  if (graphs.inference_scope != config::InferenceCudaGraphScope::kNone && why_not) {
    throw ConfigError("--inference-cuda-graph-scope " + config::to_string(graphs.inference_scope) +
                      " needs CUDA graphs, but " + *why_not +
                      "; fix: pass --inference-cuda-graph-scope none "
                      "(or leave the graph flags out), or run on a GPU build");
  }
  if (graphs.impl == config::CudaGraphImpl::kTransformerEngine ||
      graphs.impl == config::CudaGraphImpl::kFullIteration) {
    notes << "note: --cuda-graph-impl " << config::to_string(graphs.impl)
          << " graphs training only; decoding runs eagerly (inference graphs are the local implementation's)\n";
  }
  return graphs;
}

std::optional<at::ScalarType> choose_dtype(const std::string& flag, const at::Device& device, bool hugging_face) {
  if (flag == "auto") {
    if (!device.is_cuda()) return at::kFloat;
    return hugging_face ? std::nullopt : std::optional<at::ScalarType>(at::kBFloat16);
  }
  if (flag == "bf16" || flag == "bfloat16") return at::kBFloat16;
  if (flag == "fp16" || flag == "float16") return at::kHalf;
  if (flag == "fp32" || flag == "float32") return at::kFloat;
  throw ConfigError("--dtype '" + flag + "' is not a dtype graphed decodes in; fix: use auto, bf16, fp16 or fp32");
}

GenerationModel load_generation_model(const CommandLine& command_line, const at::Device& device, std::ostream& notes,
                                      bool on_host) {
  const bool from_checkpoint = command_line.settings.train.load.has_value();
  const bool from_hf = !command_line.generate.hf_folder.empty();
  if (from_checkpoint == from_hf) {
    throw ConfigError(
        std::string(from_hf ? "both --load and --hf were given" : "no model was given") +
        "; fix: pass --load DIR (a graphed checkpoint) or --hf DIR (a Hugging Face model folder), one of them");
  }
  const std::optional<at::ScalarType> dtype = choose_dtype(command_line.generate.dtype, device, from_hf);
  const at::Device target = on_host ? at::Device(at::kCPU) : device;
  return from_hf ? load_hf_folder(command_line, target, dtype)
                 : load_checkpoint_model(command_line, target, *dtype, notes);
}

std::vector<std::vector<int64_t>> read_prompts(const GenerateFlags& flags, const tokenizer::Tokenizer* tokenizer) {
  std::vector<std::string> texts = flags.prompts;
  for (const auto& file : flags.prompt_files) {
    std::string text;
    if (read_file(file, text) != 0) {
      throw DataError("--prompt-file '" + file + "' cannot be read (" + std::strerror(errno) +
                      "); fix: pass a readable text file");
    }
    texts.push_back(text);
  }
  if (texts.empty() && flags.prompt_ids.empty()) {
    throw ConfigError("no prompt was given; fix: pass --prompt TEXT, --prompt-file FILE or --prompt-ids \"1 2 3\"");
  }
  if (!texts.empty() && tokenizer == nullptr) {
    throw ConfigError(
        "a text prompt needs a tokenizer, and this model has none that graphed knows (it was not trained "
        "on text, and no tokenizer.json came with it); fix: pass --tokenizer PATH, or give token ids "
        "with --prompt-ids");
  }
  std::vector<std::vector<int64_t>> prompts;
  for (const auto& text : texts) {
    prompts.push_back(tokenizer->encode(text, /*add_special_tokens=*/true));
    if (prompts.back().empty()) throw DataError("a prompt encodes to no tokens; fix: give a prompt with some text");
  }
  for (const auto& ids : flags.prompt_ids) prompts.push_back(parse_ids(ids));
  return prompts;
}

}  // namespace graphed::cli
