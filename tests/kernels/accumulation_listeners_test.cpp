// tests/kernels/accumulation_listeners_test.cpp — every listener hears each in-place accumulation with
// the parameter, until it is removed; a listener may add or remove listeners without deadlocking.
#include <gtest/gtest.h>

#include <vector>

#include "graphed/kernels/accumulation_listeners.h"

namespace graphed::kernels {
namespace {

TEST(AccumulationListenersTest, EveryListenerHearsEachParameterUntilRemoved) {
  const at::Tensor first = at::zeros({3});
  const at::Tensor second = at::zeros({2});
  std::vector<const void*> heard_by_one, heard_by_two;
  const int64_t one =
      add_accumulation_listener([&](const at::Tensor& parameter) { heard_by_one.push_back(parameter.data_ptr()); });
  const int64_t two =
      add_accumulation_listener([&](const at::Tensor& parameter) { heard_by_two.push_back(parameter.data_ptr()); });
  gradient_accumulated(first);
  remove_accumulation_listener(one);
  gradient_accumulated(second);
  remove_accumulation_listener(two);
  gradient_accumulated(first);
  EXPECT_EQ(heard_by_one, (std::vector<const void*>{first.data_ptr()}));
  EXPECT_EQ(heard_by_two, (std::vector<const void*>{first.data_ptr(), second.data_ptr()}));
}

TEST(AccumulationListenersTest, AListenerMayAddAndRemoveListeners) {
  int outer_calls = 0, inner_calls = 0;
  int64_t inner = -1;
  int64_t outer = -1;
  outer = add_accumulation_listener([&](const at::Tensor&) {
    ++outer_calls;
    if (inner < 0) {
      inner = add_accumulation_listener([&](const at::Tensor&) { ++inner_calls; });  // hears the next call
    } else {
      remove_accumulation_listener(outer);  // the second call takes the outer one away
    }
  });
  gradient_accumulated(at::zeros({1}));
  gradient_accumulated(at::zeros({1}));
  gradient_accumulated(at::zeros({1}));  // the inner one alone
  remove_accumulation_listener(inner);
  gradient_accumulated(at::zeros({1}));
  EXPECT_EQ(outer_calls, 2);
  EXPECT_EQ(inner_calls, 2);
}

}  // namespace
}  // namespace graphed::kernels
