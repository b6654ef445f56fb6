// cli/bench_decode.h — `graphed bench --decode`: decode speed of the preset's model with random
// weights (bf16 on a GPU) through the serving engine, per inference graph scope (none, layer, block) and
// batch size (that many requests decoding together): ms per decode step, tokens/s, time to first token,
// the share of the memory-bandwidth roofline, and what capturing every bucket took. Reports; never fails
// on speed.
#pragma once

#include <ostream>

#include "graphed/cli/command_line.h"

namespace graphed::cli {

int run_bench_decode(const CommandLine& command_line, std::ostream& out);

}  // namespace graphed::cli
