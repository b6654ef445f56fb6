// cli/bench_serve.h — `graphed bench --serve`: the serving engine on a seeded workload (--requests
// prompts of --prompt-lengths tokens wanting --output-lengths new tokens, uniform or long-tail, all at
// once or arriving at --request-rate): requests/s, output tokens/s, time to first token and time per
// output token at p50 and p99, peak blocks, graph steps against eager ones. The model: --load, --hf,
// or the preset's shape with random weights (bf16 on a GPU). --json prints the workload too, which
// bench/serve_reference.py replays through transformers. Reports; never fails on speed.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "graphed/cli/command_line.h"

namespace graphed::cli {

/// "A..B" -> (A, B) with 1 <= A <= B. Throws ConfigError naming `flag`.
std::pair<int64_t, int64_t> parse_length_range(const std::string& text, const std::string& flag);

/// The seeded workload.
struct ServeWorkload {
  std::vector<int64_t> prompt_lengths;
  std::vector<int64_t> output_lengths;
  std::vector<double> arrival_seconds;  ///< all 0 when every request arrives at once
  int64_t shared_prefix = 0;            ///< leading tokens every prompt has in common
};
ServeWorkload make_workload(const ServeBenchFlags& flags, uint64_t seed);

int run_bench_serve(const CommandLine& command_line, std::ostream& out);

/// Throws ConfigError when a flag of bench --serve (its workload, the serving engine's flags, --hf) was
/// given to bench without --serve, where it would do nothing.
void refuse_serve_flags_without_serve(const CommandLine& command_line);

}  // namespace graphed::cli
