// cli/draft_model.h — speculative decoding's draft model for generate, serve and bench: the folder that
// `--speculative-config {"method": "draft_model", "model": DIR, ...}` names (a graphed checkpoint or a Hugging Face
// folder) loaded like --load or --hf, its tokenizer checked against the target's, and its proposer
// (infer/draft_proposer.h) built into the engine's options before the target's cache takes the memory left.
#pragma once

#include <cstdint>
#include <ostream>

#include <ATen/ATen.h>

#include "graphed/cli/command_line.h"
#include "graphed/infer/serving_engine.h"
#include "graphed/tokenizer/tokenizer.h"

namespace graphed::cli {

/// Builds options.speculation.draft when its method is draft_model (a no-op otherwise). `target_tokenizer`: the
/// served model's, or null; `target_vocabulary`: the ids the target's model holds. Throws ConfigError naming
/// --speculative-config, the folder and the fix (a folder that does not load, another tokenizer, a smaller vocabulary,
/// a Mamba draft).
void attach_draft_model(infer::ServingOptions& options, const CommandLine& command_line, const at::Device& device,
                        const tokenizer::Tokenizer* target_tokenizer, int64_t target_vocabulary, std::ostream& notes);

}  // namespace graphed::cli
