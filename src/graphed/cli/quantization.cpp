// cli/quantization.cpp — see cli/quantization.h.
#include "graphed/cli/quantization.h"

#include <iomanip>
#include <sstream>

#include "graphed/kernels/fp8_linear.h"
#include "graphed/model/fp8_weights_path.h"
#include "graphed/util/error.h"

namespace graphed::cli {

void check_quantization(const std::string& value) {
  if (value == "none" || value == "fp8") return;
  throw ConfigError("--quantization " + value +
                    " is not a quantization graphed knows; fix: give none (the default) "
                    "or fp8 (linear weights in FP8 E4M3, a scale per output row)");
}

std::shared_ptr<const model::Fp8WeightsPath> apply_quantization(const std::string& value, model::GptModel& model,
                                                                const at::Device& device, std::ostream& notes) {
  check_quantization(value);
  if (value == "none") return nullptr;
  std::string why_not;
  if (!kernels::fp8_supported(device, &why_not)) {
    throw ConfigError("--quantization fp8 needs a GPU with FP8 tensor cores, but " + why_not +
                      "; fix: run on an Ada, Hopper or Blackwell GPU, or drop --quantization");
  }
  const at::ScalarType dtype = model->parameters().at(0).scalar_type();
  if (dtype != at::kBFloat16) {
    throw ConfigError(std::string("--quantization fp8 casts bf16 weights, but this model is in ") +
                      c10::toString(dtype) + "; fix: give --dtype bf16 (or auto), or drop --quantization");
  }
  const auto path = model->use_fp8_weights();
  std::ostringstream note;
  note << "--quantization fp8: " << path->fp8_weight_count() << " linear weights in FP8 E4M3 with a scale per output "
       << "row (" << std::fixed << std::setprecision(2) << static_cast<double>(path->fp8_bytes()) / 1e9
       << " GB, read by every decode step instead of their bf16 form; the bf16 weights stay in memory)\n";
  notes << note.str();
  return path;
}

}  // namespace graphed::cli
