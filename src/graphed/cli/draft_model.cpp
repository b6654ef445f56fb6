// cli/draft_model.cpp — see cli/draft_model.h.
#include "graphed/cli/draft_model.h"

#include <algorithm>
#include <memory>
#include <string>

#include <ATen/core/grad_mode.h>

#include "graphed/cli/generate_setup.h"
#include "graphed/infer/draft_proposer.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::cli {
namespace {

[[noreturn]] void refuse(const std::string& folder, const std::string& problem, const std::string& fix) {
  throw ConfigError("--speculative-config: the draft model '" + folder + "' " + problem + "; fix: " + fix);
}

/// The command line that loads `folder` as --load (a graphed checkpoint) or --hf (a folder with config.json) would,
/// in generate's dtype, with the folder's own tokenizer (compared with the served model's), and nothing else of the
/// target's flags.
CommandLine draft_command_line(const CommandLine& command_line, const std::string& folder) {
  CommandLine draft;
  draft.command = command_line.command;
  draft.generate.dtype = command_line.generate.dtype;
  if (path_exists(join_path(folder, "config.json"))) {
    draft.generate.hf_folder = folder;
  } else {
    draft.settings.train.load = folder;
    draft.sources.push_back({"--speculative-config", {{"load", folder}}});
  }
  return draft;
}

/// Whether two tokenizers give the same ids: their sizes, and the ids of a text with words, digits and marks.
bool same_tokenizer(const tokenizer::Tokenizer& draft, const tokenizer::Tokenizer& target) {
  const std::string probe = "The quick brown fox, 1234 times: \"jumps\" over\n\tthe lazy dog's den!";
  return draft.vocab_size() == target.vocab_size() &&
         draft.encode(probe, /*add_special_tokens=*/false) == target.encode(probe, /*add_special_tokens=*/false);
}

}  // namespace

void attach_draft_model(infer::ServingOptions& options, const CommandLine& command_line, const at::Device& device,
                        const tokenizer::Tokenizer* target_tokenizer, int64_t target_vocabulary, std::ostream& notes) {
  infer::SpeculativeDecoding& speculation = options.speculation;
  if (speculation.method != infer::SpeculativeDecoding::Method::kDraftModel) return;
  const std::string& folder = speculation.draft_model;
  if (!path_exists(folder)) {
    refuse(folder, "does not exist", "give a graphed checkpoint folder (a --save folder) or a Hugging Face folder");
  }
  GenerationModel draft;
  try {
    draft = load_generation_model(draft_command_line(command_line, folder), device, notes);
  } catch (const graphed::Error& error) {  // its own message says what failed and the fix
    throw ConfigError("--speculative-config: the draft model '" + folder + "' does not load: " + error.what());
  }
  if (target_tokenizer != nullptr && draft.tokenizer != nullptr &&
      !same_tokenizer(*draft.tokenizer, *target_tokenizer)) {
    refuse(folder,
           "has another tokenizer (" + draft.tokenizer->description() + ", " +
               std::to_string(draft.tokenizer->vocab_size()) + " ids) than the served model (" +
               target_tokenizer->description() + ", " + std::to_string(target_tokenizer->vocab_size()) + " ids)",
           "give a draft trained with the served model's tokenizer");
  }
  const int64_t vocabulary =
      options.vocabulary > 0 ? std::min(options.vocabulary, target_vocabulary) : target_vocabulary;
  notes << "speculative decoding: draft " << draft.description << ", " << speculation.num_tokens << " tokens a step"
        << std::endl;
  const at::NoGradGuard no_grad;
  try {
    speculation.draft = std::make_shared<infer::DraftModelProposer>(draft.model, device, options, vocabulary);
  } catch (const ConfigError& error) {
    throw ConfigError("--speculative-config: the draft model '" + folder + "': " + error.what());
  }
}

}  // namespace graphed::cli
