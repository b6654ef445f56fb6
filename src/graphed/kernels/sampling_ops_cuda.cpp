// kernels/sampling_ops_cuda.cpp — kernels/sampling_ops.h's launch (namespace device) on a CUDA build:
// kernels/gumbel_max.h and kernels/top_logprobs.h on the current stream. sampling_ops_cpu.cpp is the CPU build's,
// sampling_ops.cpp both builds' (one convention for the two builds: src/graphed/CMakeLists.txt).
#include "graphed/kernels/sampling_ops.h"

#include "graphed/kernels/detail/aten_glue.h"
#include "graphed/kernels/gumbel_max.h"
#include "graphed/kernels/top_logprobs.h"

namespace graphed::kernels::device {

void gumbel_max_into(const at::Tensor& logits, const GumbelRows& rows, at::Tensor& out, float below_top) {
  GumbelMaxRows settings;
  settings.temperature = rows.temperature.data_ptr<double>();
  settings.threshold = rows.threshold.defined() ? rows.threshold.data_ptr<float>() : nullptr;
  settings.threshold_column = rows.threshold.defined() ? rows.threshold_column.data_ptr<int64_t>() : nullptr;
  settings.seed_state = rows.seed_state.data_ptr<int64_t>();
  settings.draw = rows.draw.data_ptr<int64_t>();
  settings.row_word_is_index = rows.row_word_is_index;
  launch_gumbel_max(logits.data_ptr<float>(), logits.stride(0), logits.size(0), logits.size(1), settings, below_top,
                    out.data_ptr<int64_t>(), detail::current_stream());
}

void top_logprobs_into(const at::Tensor& logits, at::Tensor& out, at::Tensor& top_ids) {
  launch_top_logprobs(logits.data_ptr<float>(), logits.stride(0), logits.size(0), logits.size(1),
                      static_cast<int>(top_ids.size(1)), out.data_ptr<float>(), top_ids.data_ptr<int64_t>(),
                      detail::current_stream());
}

}  // namespace graphed::kernels::device
