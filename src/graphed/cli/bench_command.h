// cli/bench_command.h — `graphed bench --preset P --impls none[,...]`: for each implementation,
// builds the model from the same seed, runs --bench-warmup untimed and --bench-iters timed training
// iterations on synthetic tokens, and prints one row: median ms/iter (CUDA events on the GPU), tokens/s,
// speedup vs none, capture time, peak and graph-pool memory, and the loss after the last iteration.
#pragma once

#include <ostream>

#include "graphed/cli/command_line.h"

namespace graphed::cli {

/// Returns the exit code (0). --json prints the rows as a JSON array instead of a table.
int run_bench(const CommandLine& command_line, std::ostream& out);

}  // namespace graphed::cli
