// cli/generate_setup.h — what `graphed generate` decides before decoding: the decode graph
// configuration (Megatron's rules; generate's own defaults), the dtype, the model and its tokenizer
// (a graphed checkpoint with --load, or a Hugging Face folder with --hf), and the prompts as ids.
// Every user mistake is a ConfigError or DataError that names the flag or file and the fix.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/cli/command_line.h"
#include "graphed/config/cuda_graph_config.h"
#include "graphed/model/gpt_model.h"
#include "graphed/tokenizer/tokenizer.h"

namespace graphed::cli {

/// The validated CUDA-graph configuration of a generate run. With no graph flag, generate decodes
/// with --cuda-graph-impl local at scope block on a GPU and eagerly on the CPU; a scope given without
/// an impl takes local (the only impl with inference graphs). Notes go to `notes`. Throws ConfigError
/// with Megatron's rule ids, or for graphs on the CPU.
config::CudaGraphConfig resolve_decode_graphs(const CommandLine& command_line, const at::Device& device,
                                              std::ostream& notes);

/// --dtype auto|bf16|fp16|fp32. auto: fp32 on the CPU; on a GPU bf16 for a graphed checkpoint and the
/// folder's own dtype (config.json's torch_dtype) for --hf, so nullopt. Throws ConfigError.
std::optional<at::ScalarType> choose_dtype(const std::string& flag, const at::Device& device, bool hugging_face);

/// A model ready to decode, and what came with it.
struct GenerationModel {
  model::GptModel model{nullptr};
  std::string description;          ///< "graphed checkpoint DIR (iteration 1500)" or "LlamaForCausalLM from DIR"
  int64_t context = 0;              ///< the most positions the model can attend to
  std::vector<int64_t> end_tokens;  ///< the model's end-of-sequence ids (default stop tokens)
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;  ///< null when none is known (then only --prompt-ids)
};

/// Loads --load's checkpoint or --hf's folder (exactly one must be given) in the dtype choose_dtype gives for
/// `device`, in eval mode, with its tokenizer (--tokenizer overrides): onto `device`, or into host memory with
/// on_host (a tensor-parallel rank splits it there, then moves its part). Throws ConfigError / DataError /
/// CheckpointError naming the flag, file and fix.
GenerationModel load_generation_model(const CommandLine& command_line, const at::Device& device, std::ostream& notes,
                                      bool on_host = false);

/// The prompts as token ids, in the order --prompt, --prompt-file, --prompt-ids. Throws ConfigError
/// when there is none, or a text prompt without a tokenizer; DataError for an unreadable file or a bad id list.
std::vector<std::vector<int64_t>> read_prompts(const GenerateFlags& flags, const tokenizer::Tokenizer* tokenizer);

}  // namespace graphed::cli
