// train/expert_overflow.cpp — see train/expert_overflow.h.
#include "graphed/train/expert_overflow.h"

namespace graphed::train {

bool ExpertOverflowCheck::overflowed(model::GptModel& model) {
  at::Tensor overflow = model->take_moe_overflow();  // {block overflowed, rows needed, stash full}
  if (!overflow.defined()) overflow = at::zeros({3}, at::TensorOptions().device(device_).dtype(at::kLong));
  overflow = overflow.contiguous();
  world_.all_reduce_max(overflow).wait();
  const at::Tensor host = overflow.to(at::kCPU);  // the iteration's one host sync
  const bool block = host[0].item<int64_t>() > 0;
  const bool stash = host[2].item<int64_t>() > 0;
  if (block) rows_needed_ = host[1].item<int64_t>();
  if (stash) ++stash_overflows_;
  return block || stash;
}

}  // namespace graphed::train
