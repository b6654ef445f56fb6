// model/layer_cache.cpp — see model/layer_cache.h.
#include "graphed/model/layer_cache.h"

namespace graphed::model {
namespace {

at::Tensor first_rows(const at::Tensor& tensor, int64_t count) {
  return tensor.defined() ? tensor.narrow(0, 0, count) : tensor;
}

}  // namespace

LayerCache LayerCache::rows(int64_t count) const {
  return {first_rows(key, count), first_rows(value, count), first_rows(conv_state, count),
          first_rows(ssm_state, count)};
}

void LayerCache::reset_recurrent_state() const {
  if (conv_state.defined()) conv_state.zero_();
  if (ssm_state.defined()) ssm_state.zero_();
}

}  // namespace graphed::model
