// train/memory_estimate.h — about how much memory a training run takes, from the configuration alone,
// so that a micro batch far too large for the machine is refused (or warned about) with the estimate
// and a size that fits, before minutes of silent allocation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "graphed/config/run_config.h"

namespace graphed::train {

struct MemoryEstimate {
  int64_t state_bytes = 0;                  ///< parameters, gradients and AdamW's two moments (fp32)
  int64_t activation_bytes_per_sample = 0;  ///< activations kept for backward, and the logits, per sample
  int64_t micro_batch_size = 0;
  int64_t total_bytes() const { return state_bytes + activation_bytes_per_sample * micro_batch_size; }
};

/// The estimate for one microbatch in flight: per layer s*(10h + 2f) + 2*heads*s^2 elements (inputs
/// of the norms, projections, MLP and attention scores) of 4 bytes (2 under bf16 autocast on a GPU),
/// 3*s*vocab fp32 elements for the logits and the loss, plus 16 bytes per parameter (4 + 12/D with
/// --use-distributed-optimizer over D data-parallel ranks); a tensor-parallel rank's share is 1/T of that
/// (--tensor-model-parallel-size T).
/// autocast: activations in bf16 (--bf16 on a GPU).
MemoryEstimate estimate_training_memory(const config::RunConfig& config, bool autocast);

/// Throws DataError when the estimate exceeds available_bytes, naming --micro-batch-size, the
/// estimate, the memory available on `where` and the largest micro batch that fits. Returns a
/// warning when it takes more than 80% of it; nullopt otherwise.
std::optional<std::string> check_memory_fits(const config::RunConfig& config, bool autocast, int64_t available_bytes,
                                             const std::string& where);

}  // namespace graphed::train
