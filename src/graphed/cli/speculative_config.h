// cli/speculative_config.h — `--speculative-config JSON` (vLLM's format) on generate, serve and bench: which method
// proposes tokens and how many, read into infer::SpeculativeDecoding. A method graphed has not built, a field out of
// range or a field it does not know is a ConfigError naming the field, the value and the fix.
#pragma once

#include <string>

#include "graphed/infer/speculation.h"

namespace graphed::cli {

/// The settings `text` (a JSON object) gives; "" = no speculation. Throws ConfigError.
infer::SpeculativeDecoding parse_speculative_config(const std::string& text);

}  // namespace graphed::cli
