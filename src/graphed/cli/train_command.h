// cli/train_command.h — `graphed train [flags]`: trains the configured model on the configured data,
// printing progress at --log-interval (text, or one JSON object per line with --json), evaluating,
// checkpointing, and (for text data) showing short samples so a newcomer sees what the model learned.
// With --save (or --exit-signal-handler), SIGINT and SIGTERM end the run after the iteration, saved.
#pragma once

#include <ostream>

#include "graphed/cli/command_line.h"

namespace graphed::cli {

/// Returns the exit code (0). Throws graphed::Error for bad configuration, data or checkpoints.
int run_train(const CommandLine& command_line, std::ostream& out);

}  // namespace graphed::cli
