// tests/kernels/working_copy_test.cpp — working_copy (kernels/working_copy.h): the copy's values with the master's
// gradient, added into .grad in place (the listeners told, autograd handed nothing) or handed to autograd.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <vector>

#include "graphed/kernels/accumulation_listeners.h"
#include "graphed/kernels/working_copy.h"

namespace graphed::kernels {
namespace {

TEST(WorkingCopyTest, TheCopysGradientIsAddedIntoTheMastersGradInPlace) {
  const at::Tensor master = at::tensor({1.0, 2.0, 3.0}, at::kDouble).requires_grad_(true);
  master.mutable_grad() = at::full({3}, 10.0, at::kFloat);  // an fp32 .grad, as the trainer's flat buffer gives
  const at::Tensor copy = at::tensor({1.0f, 2.0f, 3.0f});
  std::vector<const void*> heard;
  const int64_t id =
      add_accumulation_listener([&](const at::Tensor& parameter) { heard.push_back(parameter.unsafeGetTensorImpl()); });
  const at::Tensor used = working_copy(master, copy, /*accumulate=*/true);
  EXPECT_TRUE(at::equal(used, copy));
  (used * at::tensor({1.0f, 2.0f, 4.0f})).sum().backward();
  remove_accumulation_listener(id);
  EXPECT_TRUE(at::equal(master.grad(), at::tensor({11.0f, 12.0f, 14.0f})));
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0], master.unsafeGetTensorImpl());
}

TEST(WorkingCopyTest, WithoutAccumulationTheGradientGoesToAutogradInTheMastersType) {
  const at::Tensor master = at::tensor({1.0, 2.0}, at::kDouble).requires_grad_(true);
  const at::Tensor copy = at::tensor({1.0f, 2.0f});
  const at::Tensor gradient =
      torch::autograd::grad({(working_copy(master, copy, /*accumulate=*/false) * 3.0f).sum()}, {master})[0];
  EXPECT_EQ(gradient.scalar_type(), at::kDouble);
  EXPECT_TRUE(at::equal(gradient, at::tensor({3.0, 3.0}, at::kDouble)));
  // An accumulating call whose master has no fp32 .grad hands the gradient to autograd too.
  const at::Tensor fresh = at::tensor({1.0, 2.0}, at::kDouble).requires_grad_(true);
  const at::Tensor again = torch::autograd::grad({working_copy(fresh, copy, true).sum()}, {fresh})[0];
  EXPECT_TRUE(at::equal(again, at::tensor({1.0, 1.0}, at::kDouble)));
}

}  // namespace
}  // namespace graphed::kernels
