// tests/capture/argument_signature_test.cpp — the per-call argument check of graphed units: each kind
// of mismatch names the unit, the argument and both values; signature keys group equal layouts.
#include "graphed/capture/argument_signature.h"

#include <gtest/gtest.h>

#include "error_text.h"

namespace graphed::capture {
namespace {

using graphed::testing::error_text;

const std::string kFix =
    "; fix: call a graphed unit with tensors of exactly the shapes, dtypes, devices and requires-grad flags it was "
    "captured with (a graph replays fixed kernels on fixed buffers), or delete the graphs and capture again for the "
    "new shapes";

std::vector<ArgumentSignature> captured() {
  return {signature_of("u", "hidden", at::zeros({8, 128, 256}).requires_grad_()),
          signature_of("u", "argument 1", at::zeros({4}, at::kLong))};
}

TEST(ArgumentSignatureTest, MatchingArgumentsPass) {
  EXPECT_EQ(error_text([] {
              check_arguments("u", captured(), {at::ones({8, 128, 256}).requires_grad_(), at::ones({4}, at::kLong)});
            }),
            "(no error)");
}

TEST(ArgumentSignatureTest, EveryMismatchIsNamed) {
  const auto check = [](const std::vector<at::Tensor>& arguments) {
    return error_text([&] { check_arguments("layers.0.attention (microbatch 1)", captured(), arguments); });
  };
  EXPECT_EQ(check({at::ones({8, 128, 256}).requires_grad_()}),
            "unit layers.0.attention (microbatch 1) was called with 1 arguments but was captured with 2" + kFix);
  EXPECT_EQ(check({at::ones({4, 128, 256}).requires_grad_(), at::ones({4}, at::kLong)}),
            "unit layers.0.attention (microbatch 1): argument 'hidden' (argument 0) has shape [4, 128, 256], captured "
            "with [8, 128, 256]" +
                kFix);
  EXPECT_EQ(check({at::ones({8, 128, 256}, at::kDouble).requires_grad_(), at::ones({4}, at::kLong)}),
            "unit layers.0.attention (microbatch 1): argument 'hidden' (argument 0) has dtype Double, captured with "
            "Float" +
                kFix);
  EXPECT_EQ(check({at::ones({8, 128, 256}), at::ones({4}, at::kLong)}),
            "unit layers.0.attention (microbatch 1): argument 'hidden' (argument 0) has requires_grad false, captured "
            "with true" +
                kFix);
  EXPECT_EQ(check({at::ones({8, 128, 256}).requires_grad_(), at::ones({4}, at::kInt)}),
            "unit layers.0.attention (microbatch 1): argument 1 has dtype Int, captured with Long" + kFix);
  EXPECT_EQ(check({at::ones({8, 128, 256}).requires_grad_(), at::Tensor()}),
            "unit layers.0.attention (microbatch 1): argument 1 is an undefined tensor; captured with [4] Long on cpu, "
            "no grad" +
                kFix);
}

TEST(ArgumentSignatureTest, UndefinedSampleIsNamed) {
  EXPECT_EQ(error_text([] { signature_of("layers.1.mlp (microbatch 0)", "hidden", at::Tensor()); }),
            "unit layers.1.mlp (microbatch 0): argument 'hidden' is an undefined tensor; fix: graphed units take "
            "defined tensors only; pass a tensor (zeros if it carries nothing)");
}

TEST(ArgumentSignatureTest, KeysIgnoreNamesAndValuesButNotLayout) {
  const auto key = [](const at::Tensor& t, const std::string& name) {
    return signature_key({signature_of("u", name, t)});
  };
  EXPECT_EQ(key(at::zeros({2, 3}), "a"), key(at::ones({2, 3}), "b"));
  EXPECT_NE(key(at::zeros({2, 3}), "a"), key(at::zeros({3, 2}), "a"));
  EXPECT_NE(key(at::zeros({2, 3}), "a"), key(at::zeros({2, 3}, at::kHalf), "a"));
  EXPECT_NE(key(at::zeros({2, 3}), "a"), key(at::zeros({2, 3}).requires_grad_(), "a"));
  EXPECT_EQ(describe(signature_of("u", "x", at::zeros({2, 3}).requires_grad_())), "[2, 3] Float on cpu, requires grad");
}

}  // namespace
}  // namespace graphed::capture
