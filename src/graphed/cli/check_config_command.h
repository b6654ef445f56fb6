// cli/check_config_command.h — `graphed check-config [flags]`: resolves the configuration and
// prints it normalized, with every migration, note and warning; exit code 1 when it is invalid.
#pragma once

#include <ostream>

#include "graphed/cli/command_line.h"

namespace graphed::cli {

/// Runs check-config on a parsed command line, writing to out. Returns the exit code: 0 when the
/// configuration is valid, 1 when any rule reports an error.
int run_check_config(const CommandLine& command_line, std::ostream& out);

}  // namespace graphed::cli
