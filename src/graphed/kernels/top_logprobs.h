// kernels/top_logprobs.h — the serving step's log probabilities in one kernel, free of ATen: per row the log of
// the softmax's partition function and the `top` likeliest columns with their log probabilities, largest first
// (ties by the smaller column), where LibTorch takes a logsumexp and a topk (about 240 µs for 256 rows of 32,000
// columns on an H200, 5-7% of a loaded step). One block a row: one pass for the partition function (online
// max and sum), a radix select of the top-th largest value over the row (four passes of 8-bit digits, mostly from
// L2), and a pass collecting the larger values and the ties (in column order when only some of them are among the
// top); each pass issues its loads eight at a time. The ATen face is
// kernels/sampling_ops.h's top_logprobs_into. A launch that fails throws graphed::Error.
#pragma once

#include <cstdint>

namespace graphed::kernels {

/// The most likeliest columns one launch reports per row.
constexpr int kMaxTopLogprobColumns = 32;

/// For each row r of logits (float32, columns < `columns` at logits + r x row_stride): out[r x (1 + top)] = log of
/// sum exp, out[r x (1 + top) + 1 + i] = the i-th largest value minus it, ids[r x top + i] = its column, for i <
/// top <= min(columns, kMaxTopLogprobColumns). rows up to 2^31.
void launch_top_logprobs(const float* logits, int64_t row_stride, int64_t rows, int64_t columns, int top, float* out,
                         int64_t* ids, void* stream);

}  // namespace graphed::kernels
