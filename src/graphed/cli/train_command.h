// cli/train_command.h — `graphed train [flags]`: trains the configured model on the configured data,
// printing progress at --log-interval, evaluating, checkpointing, and (for text data) showing a short
// greedy sample at the end so a newcomer sees what the model learned.
#pragma once

#include <ostream>

#include "graphed/cli/command_line.h"

namespace graphed::cli {

/// Returns the exit code (0). Throws graphed::Error for bad configuration, data or checkpoints.
int run_train(const CommandLine& command_line, std::ostream& out);

}  // namespace graphed::cli
