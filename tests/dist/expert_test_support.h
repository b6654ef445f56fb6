// tests/dist/expert_test_support.h — what the expert-parallel tests share: moe-small's MoE flags for `graphed train`
// on tiny, every parameter's gradient of an MoE layer after a backward, and a float64 comparison that names the
// tensor and its largest difference.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "graphed/model/moe.h"

namespace graphed::testing {

/// moe-small's MoE on tiny (4 experts, top-2), dispatched all-to-all, then `dispatch`'s flags.
inline std::vector<std::string> moe_flags(const std::vector<std::string>& dispatch) {
  std::vector<std::string> flags = {
      "--num-experts",        "4",    "--moe-router-topk",           "2",       "--moe-ffn-hidden-size", "256",
      "--moe-aux-loss-coeff", "0.01", "--moe-token-dispatcher-type", "alltoall"};
  flags.insert(flags.end(), dispatch.begin(), dispatch.end());
  return flags;
}

/// Every parameter's gradient by name (zeros where none reached it, as for an expert that received no token).
inline std::map<std::string, at::Tensor> gradients_of(model::Moe& moe) {
  std::map<std::string, at::Tensor> gradients;
  for (const auto& item : moe->named_parameters()) {
    gradients[item.key()] = item.value().grad().defined() ? item.value().grad().clone() : at::zeros_like(item.value());
  }
  return gradients;
}

/// Equal within float64 rounding (1e-12), or a failure naming `what` and the largest difference.
inline void expect_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(at::allclose(actual, expected, 1e-12, 1e-12))
      << what << ": max difference " << (actual - expected).abs().max().item<double>();
}

}  // namespace graphed::testing
