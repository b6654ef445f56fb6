// model/fused_path.cpp — see model/fused_path.h.
#include "graphed/model/fused_path.h"

namespace graphed::model {

FusedPath::FusedPath(const std::vector<std::pair<at::Tensor, at::Tensor>>& copies, at::ScalarType activation_type,
                     bool accumulate_in_place)
    : activation_type_(activation_type), accumulate_in_place_(accumulate_in_place) {
  for (const auto& [master, copy] : copies) copies_.emplace(master.unsafeGetTensorImpl(), copy);
}

at::Tensor FusedPath::copy_of(const at::Tensor& master) const {
  if (!master.defined()) return {};
  const auto found = copies_.find(master.unsafeGetTensorImpl());
  return found == copies_.end() ? at::Tensor() : found->second;
}

}  // namespace graphed::model
