// tests/model/kernel_path_test.cpp — the ATen path: what its inference operations compute (decode_linear with
// its input transforms, the inference norm, RoPE into a paged cache), and that the decode kernels' path over
// it (model/decode_kernel_path.h) gives the same bits wherever its kernels do not take the tensors (here: the
// CPU), which is what --no-fused-kernels and a CPU server rely on.
#include "graphed/model/kernel_path.h"

#include <gtest/gtest.h>

#include "graphed/kernels/training_ops.h"
#include "graphed/model/decode_kernel_path.h"
#include "graphed/model/fused_path.h"

namespace graphed::model {
namespace {

TEST(KernelPathTest, TheAtenPathHasNoFusedOutputLoss) { EXPECT_FALSE(aten_path()->fuses_output_loss()); }

// The weights a layer multiplies by itself (an MoE's router and experts): a cast on the ATen path; on the fused path
// the optimizer's working copy, whose gradient is added into the master's fp32 .grad in place.
TEST(KernelPathTest, WorkingWeightsAreCastsOrTheFusedPathsCopies) {
  const at::Tensor master = at::tensor({1.5, -2.0}, at::kDouble).requires_grad_(true);
  const at::Tensor cast = aten_path()->working_weight(master, at::kFloat);
  EXPECT_TRUE(at::equal(cast, at::tensor({1.5f, -2.0f})));
  EXPECT_TRUE(cast.requires_grad());

  const at::Tensor copy = at::tensor({1.0f, -2.0f});  // deliberately not master's value: the copy is what is read
  const FusedPath fused({{master, copy}}, at::kFloat, /*accumulate_in_place=*/true);
  master.mutable_grad() = at::zeros({2}, at::kFloat);
  const at::Tensor used = fused.working_weight(master, at::kFloat);
  EXPECT_TRUE(at::equal(used, copy));
  (used * at::tensor({2.0f, 3.0f})).sum().backward();
  EXPECT_TRUE(at::equal(master.grad(), at::tensor({2.0f, 3.0f})));
  // A type the copy is not in: a cast of the master.
  EXPECT_TRUE(at::equal(fused.working_weight(master, at::kDouble), master));
}

TEST(KernelPathTest, DecodeLinearIsLibTorchsLinearOfTheTransformedInputPlusTheResidual) {
  at::manual_seed(3);
  const at::Tensor input = at::randn({2, 8});
  const at::Tensor weight = at::randn({4, 8});
  const at::Tensor bias = at::randn({4});
  const at::Tensor residual = at::randn({2, 4});
  const auto path = aten_path();
  EXPECT_TRUE(
      at::equal(path->decode_linear(input, weight, bias, {}, residual), residual + at::linear(input, weight, bias)));
  EXPECT_TRUE(at::equal(path->decode_linear(input, weight, {}, {}, {}), at::linear(input, weight)));
  EXPECT_TRUE(at::equal(path->inference_linear(input, weight, bias), at::linear(input, weight, bias)));
  EXPECT_TRUE(at::equal(path->residual_add(residual, residual), residual + residual));
  EXPECT_TRUE(at::equal(path->logits(input, weight), at::linear(input, weight)));

  kernels::LinearInput norm;
  norm.transform = kernels::RowTransform::kRmsNorm;
  norm.norm_weight = at::randn({8});
  norm.epsilon = 1e-5;
  const at::Tensor normed = kernels::reference::norm(input, norm.norm_weight, {}, 1e-5, input.scalar_type());
  EXPECT_TRUE(at::equal(path->inference_norm(input, norm.norm_weight, {}, 1e-5), normed));
  EXPECT_TRUE(at::equal(path->decode_linear(input, weight, bias, norm, {}), at::linear(normed, weight, bias)));
  kernels::LinearInput swiglu;
  swiglu.transform = kernels::RowTransform::kSwiglu;
  const at::Tensor wide = at::randn({2, 16});
  EXPECT_TRUE(at::equal(path->decode_linear(wide, weight, {}, swiglu, residual),
                        residual + at::linear(kernels::reference::swiglu(wide), weight)));
}

/// A paged cache write of 3 tokens at positions 5, 0, 2 (2 heads, 1 group, head dim 4) into rows 9, 2, 6 of
/// a cache of 3 blocks of 4 positions.
struct Write {
  at::Tensor qkv = at::randn({3, (2 + 2) * 4}, at::kDouble);
  PagedCacheWrite write;
  Write() {
    write.positions = at::tensor(std::vector<int64_t>{5, 0, 2}, at::kLong);
    write.cache_rows = at::tensor(std::vector<int64_t>{9, 2, 6}, at::kLong);
    const at::Tensor angles = at::outer(at::arange(8, at::kDouble), at::rand({2}, at::kDouble));
    write.cos = angles.cos();
    write.sin = angles.sin();
    write.key_cache = at::zeros({3, 4, 1, 4}, at::kDouble);
    write.value_cache = at::zeros({3, 4, 1, 4}, at::kDouble);
    write.heads = 2;
    write.groups = 1;
    write.head_dim = 4;
  }
};

TEST(KernelPathTest, RopeIntoThePagedCacheRotatesAtEachPositionAndWritesEachRow) {
  at::manual_seed(4);
  Write given;
  const PagedCacheWrite& write = given.write;
  const at::Tensor query = aten_path()->rope_into_paged_cache(given.qkv, write);
  ASSERT_EQ(query.sizes().vec(), (std::vector<int64_t>{3, 2, 4}));
  const at::Tensor keys = write.key_cache.view({-1, 4});
  const at::Tensor values = write.value_cache.view({-1, 4});
  for (int64_t token = 0; token < 3; ++token) {
    const int64_t position = write.positions[token].item<int64_t>();
    const int64_t row = write.cache_rows[token].item<int64_t>();
    const at::Tensor parts = given.qkv[token].view({4, 4});  // 2 query heads, the key, the value
    const auto rotate = [&](const at::Tensor& x) {
      return kernels::reference::rotate_halves(x, write.cos[position], write.sin[position]);
    };
    EXPECT_TRUE(at::allclose(query[token], rotate(parts.narrow(0, 0, 2)))) << "query of token " << token;
    EXPECT_TRUE(at::allclose(keys[row], rotate(parts[2]))) << "key of token " << token;
    EXPECT_TRUE(at::equal(values[row], parts[3])) << "value of token " << token;
  }
  EXPECT_EQ(at::count_nonzero(keys.abs().sum(1)).item<int64_t>(), 3) << "only the three rows are written";
}

TEST(KernelPathTest, TheDecodeKernelsPathEqualsItsInnerPathWhereTheKernelsDoNotTakeTheTensors) {
  at::manual_seed(5);
  const auto decode = with_decode_kernels(aten_path());
  const at::Tensor input = at::randn({3, 8}, at::kDouble);
  const at::Tensor weight = at::randn({4, 8}, at::kDouble);
  const at::Tensor residual = at::randn({3, 4}, at::kDouble);
  kernels::LinearInput norm;
  norm.transform = kernels::RowTransform::kRmsNorm;
  norm.norm_weight = at::randn({8}, at::kDouble);
  norm.epsilon = 1e-6;
  EXPECT_TRUE(at::equal(decode->decode_linear(input, weight, {}, norm, residual),
                        aten_path()->decode_linear(input, weight, {}, norm, residual)));
  EXPECT_TRUE(at::equal(decode->inference_linear(input, weight, {}), at::linear(input, weight)));
  EXPECT_TRUE(at::equal(decode->inference_norm(input, norm.norm_weight, {}, 1e-6),
                        aten_path()->inference_norm(input, norm.norm_weight, {}, 1e-6)));
  Write first, second;  // the same inputs, each into its own cache
  second.qkv.copy_(first.qkv);
  second.write.cos = first.write.cos;
  second.write.sin = first.write.sin;
  EXPECT_TRUE(at::equal(decode->rope_into_paged_cache(first.qkv, first.write),
                        aten_path()->rope_into_paged_cache(second.qkv, second.write)));
  EXPECT_TRUE(at::equal(first.write.key_cache, second.write.key_cache));
}

}  // namespace
}  // namespace graphed::model
