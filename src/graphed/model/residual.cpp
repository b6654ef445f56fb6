// model/residual.cpp — see model/residual.h.
#include "graphed/model/residual.h"

namespace graphed::model {

at::Tensor Residual::add(const at::Tensor& hidden, const at::Tensor& update) const {
  if (dropout_ == 0.0 || !layer_.is_training()) {  // no dropout kernel at p = 0
    return path_->residual_add(hidden, update);
  }
  // With sequence parallelism `update` is this rank's part of the sequence: its own mask (Megatron's rule).
  return hidden + tensor_.with_rank_random([&] { return at::dropout(update, dropout_, /*train=*/true); });
}

}  // namespace graphed::model
