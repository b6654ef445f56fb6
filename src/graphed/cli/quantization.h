// cli/quantization.h — --quantization none|fp8 (vLLM's flag) for the commands that decode: generate, serve,
// bench --decode and bench --serve. fp8 holds the model's linear weights in FP8 with a scale per output row
// (model/fp8_weights_path.h), cast once from the bf16 weights the command loaded.
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include <ATen/ATen.h>

#include "graphed/model/fp8_weights_path.h"
#include "graphed/model/gpt_model.h"

namespace graphed::cli {

/// Throws ConfigError for a value other than none or fp8.
void check_quantization(const std::string& value);

/// Applies --quantization to a model loaded for decoding on `device` and writes a note of what it did; returns
/// the FP8 weights path (null for none). Throws ConfigError naming the flag and the fix: an unknown value, a
/// device without FP8 tensor cores (named), or a model that is not in bf16.
std::shared_ptr<const model::Fp8WeightsPath> apply_quantization(const std::string& value, model::GptModel& model,
                                                                const at::Device& device, std::ostream& notes);

}  // namespace graphed::cli
