// infer/decode_roofline.h — the least a decode step must read from GPU memory, and so the fastest it
// can run at a given bandwidth: every weight once (the embedding table only for the rows looked up
// when the output layer has its own weights), the keys and values of each row's context, and the
// Mamba layers' states read and written back.
#pragma once

#include <cstdint>

#include "graphed/model/gpt_model.h"

namespace graphed::infer {

/// Bytes one decode step of `batch` rows, each with `context` cached positions, must read at the least;
/// `weight_bytes_saved` less where some weights are read in a smaller form (FP8: model/fp8_weights_path.h).
double decode_bytes_per_step(model::GptModel& model, int64_t batch, int64_t context, double weight_bytes_saved = 0);

}  // namespace graphed::infer
