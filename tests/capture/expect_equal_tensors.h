// tests/capture/expect_equal_tensors.h — the bitwise check the capture GPU tests share: two lists of
// tensors (outputs, input grads, parameter grads) equal element for element, with the largest
// difference reported for any that is not.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::testing {

inline void expect_all_equal(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& expected,
                             const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].defined() && expected[i].defined()) << what << " " << i;
    EXPECT_TRUE(at::equal(got[i], expected[i]))
        << what << " " << i << " differs by " << (got[i] - expected[i]).abs().max().item<double>();
  }
}

}  // namespace graphed::testing
