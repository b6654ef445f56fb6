// cli/report_command.h — `graphed report INPUT... [-o FILE]`: one self-contained HTML page of training
// runs (RUN_DIR holding metrics.jsonl, or a --metrics-file file) and bench files (graphed bench --json,
// bench/reference_pytorch.py --json). The work is in report/; this checks the output path first,
// reads the inputs, writes the page and prints one summary line.
#pragma once

#include <ostream>

#include "graphed/cli/command_line.h"

namespace graphed::cli {

/// Returns the exit code (0); bad inputs or an unwritable output throw DataError before any file is
/// written. Prints "report: wrote FILE (N runs, M bench files, K charts)".
int run_report(const CommandLine& command_line, std::ostream& out);

}  // namespace graphed::cli
