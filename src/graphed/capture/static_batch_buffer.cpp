// capture/static_batch_buffer.cpp — see capture/static_batch_buffer.h.
#include "graphed/capture/static_batch_buffer.h"

#include <sstream>

#include "graphed/util/error.h"

namespace graphed::capture {

void StaticBatchBuffer::fill_microbatch(int64_t microbatch, const std::vector<at::Tensor>& inputs,
                                        const at::Device& device) {
  GRAPHED_INTERNAL_ASSERT(microbatch >= 0 && microbatch <= microbatches(), "microbatch ", microbatch,
                          " filled before microbatch ", microbatches());
  if (microbatch == microbatches()) {
    std::vector<at::Tensor> slot;
    for (const auto& input : inputs) slot.push_back(at::empty(input.sizes(), input.options().device(device)));
    slots_.push_back(std::move(slot));
  }
  auto& slot = slots_[static_cast<std::size_t>(microbatch)];
  if (slot.size() != inputs.size()) {
    throw Error(name_ + ": microbatch " + std::to_string(microbatch) + " has " + std::to_string(inputs.size()) +
                " inputs, its static buffer " + std::to_string(slot.size()) +
                "; fix: keep the same inputs every iteration when training with CUDA graphs");
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].sizes() != slot[i].sizes() || inputs[i].scalar_type() != slot[i].scalar_type()) {
      std::ostringstream message;
      message << name_ << ": microbatch " << microbatch << " input " << i << " is " << inputs[i].sizes() << " "
              << inputs[i].scalar_type() << ", but its static buffer is " << slot[i].sizes() << " "
              << slot[i].scalar_type() << " (fixed at capture); fix: keep shapes static with CUDA graphs, "
              << "or run without them";
      throw Error(message.str());
    }
    slot[i].copy_(inputs[i], /*non_blocking=*/true);
  }
}

const std::vector<at::Tensor>& StaticBatchBuffer::microbatch(int64_t microbatch) const {
  GRAPHED_INTERNAL_ASSERT(microbatch >= 0 && microbatch < microbatches(), "no static microbatch ", microbatch);
  return slots_[static_cast<std::size_t>(microbatch)];
}

std::vector<const void*> StaticBatchBuffer::addresses() const {
  std::vector<const void*> pointers;
  for (const auto& slot : slots_) {
    for (const auto& tensor : slot) pointers.push_back(tensor.data_ptr());
  }
  return pointers;
}

int64_t StaticBatchBuffer::bytes() const {
  int64_t total = 0;
  for (const auto& slot : slots_) {
    for (const auto& tensor : slot) total += static_cast<int64_t>(tensor.numel() * tensor.element_size());
  }
  return total;
}

}  // namespace graphed::capture
