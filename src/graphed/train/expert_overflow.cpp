// train/expert_overflow.cpp — see train/expert_overflow.h.
#include "graphed/train/expert_overflow.h"

namespace graphed::train {

bool ExpertOverflowCheck::overflowed(model::GptModel& model) {
  at::Tensor overflow = model->take_moe_overflow();
  if (!overflow.defined()) overflow = at::zeros({2}, at::TensorOptions().device(device_).dtype(at::kLong));
  overflow = overflow.contiguous();
  world_.all_reduce_max(overflow).wait();
  const at::Tensor host = overflow.to(at::kCPU);  // the iteration's one host sync
  const bool any = host[0].item<int64_t>() > 0;
  if (any) rows_needed_ = host[1].item<int64_t>();
  return any;
}

}  // namespace graphed::train
