// cli/generate_command.h — `graphed generate (--load DIR | --hf DIR) (--prompt T | --prompt-file F |
// --prompt-ids IDS) ...`: continues the prompts with the serving engine (infer/serving_engine.h) and
// prints the completions (streamed as they come on a terminal), then time to first token, tokens/s,
// ms per decode step, and what capturing the decode graphs took; --json prints one JSON object.
#pragma once

#include <ostream>

#include "graphed/cli/command_line.h"

namespace graphed::cli {

/// Returns the exit code (0). Throws graphed::Error for bad flags, models, tokenizers or prompts.
int run_generate(const CommandLine& command_line, std::ostream& out);

}  // namespace graphed::cli
