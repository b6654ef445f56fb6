// cli/bench_command.h — `graphed bench --preset P --impls none[,...]`: for each implementation,
// builds the model from the same seed, runs --bench-warmup untimed iterations, then --bench-iters
// synchronized iterations (each timed alone with CUDA events: median ms/iter, host enqueue time) and
// --bench-iters pipelined ones (back to back with no synchronization, as training runs: one time over
// all), on synthetic tokens. One row per impl: both times, tokens/s (pipelined), speedup vs none, graphs,
// capture time, peak, reserved, pool and graph memory, and the loss of the last synchronized iteration.
#pragma once

#include <ostream>

#include "graphed/cli/command_line.h"

namespace graphed::cli {

/// Returns the exit code (0). --json prints the rows as a JSON array instead of a table.
int run_bench(const CommandLine& command_line, std::ostream& out);

}  // namespace graphed::cli
