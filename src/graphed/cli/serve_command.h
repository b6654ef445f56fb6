// cli/serve_command.h — `graphed serve`: loads a model (--load or --hf), starts the serving engine behind
// its own thread and the OpenAI-compatible HTTP server in front of it, says where it listens, and on
// SIGTERM or SIGINT stops taking requests, lets running ones finish within --shutdown-grace-seconds,
// cancels the rest and exits 0.
#pragma once

#include <ostream>

#include "graphed/cli/command_line.h"

namespace graphed::cli {

int run_serve(const CommandLine& command_line, std::ostream& out);

}  // namespace graphed::cli
