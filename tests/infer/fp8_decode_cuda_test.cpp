// tests/infer/fp8_decode_cuda_test.cpp — decoding with FP8 weights (--quantization fp8, model/fp8_weights_path.h)
// on the GPU, for the Llama-style test model: every matrix of the layers and the output layer is held in FP8 at
// about half the bytes; the serving engine's graphs (scope layer and block) give the eager FP8 tokens bit for
// bit, for batches that take the one- and two-row kernels and those that take the scaled GEMM; and the FP8
// model's logits stay within FP8's error of the bf16 model's.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "cuda_test.h"
#include "graphed/infer/serving_engine.h"
#include "graphed/kernels/fp8_linear.h"
#include "graphed/model/fp8_weights_path.h"
#include "test_models.h"

namespace graphed::infer {
namespace {

using config::InferenceCudaGraphScope;

class Fp8DecodeCudaTest : public graphed::testing::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    std::string why_not;
    if (!kernels::fp8_supported(at::Device(at::kCUDA, 0), &why_not)) GTEST_SKIP() << why_not;
  }
};

/// The greedy tokens of batches of 1, 2, 3 and 5 mixed prompts, each batch alone in an engine of 8 requests.
std::vector<std::vector<std::vector<int64_t>>> decode(model::GptModel& model, InferenceCudaGraphScope scope) {
  ServingOptions options;
  options.scope = scope;
  options.max_requests = 8;
  options.max_sequence = 64;
  options.block_size = 16;
  options.buffer_size_gb = 0.05;
  std::vector<std::vector<std::vector<int64_t>>> tokens;
  for (const int64_t batch : {1, 2, 3, 5}) {
    tokens.push_back(testing::serve_greedy(model, at::Device(at::kCUDA), options, testing::mixed_prompts(batch), 24));
  }
  return tokens;
}

TEST_F(Fp8DecodeCudaTest, GraphsEqualEagerAndLogitsStayNearBf16) {
  model::GptModel bf16 = testing::gpu_test_model(testing::ModelStyle::kLlama, 64);
  model::GptModel fp8 = testing::gpu_test_model(testing::ModelStyle::kLlama, 64);
  const at::NoGradGuard no_grad;
  const auto path = fp8->use_fp8_weights();
  EXPECT_EQ(path->fp8_weight_count(), 3 * 4 + 1);  // QKV, projection, fc1, fc2 of 3 layers; the output layer
  EXPECT_LT(path->fp8_bytes(), path->replaced_bytes() / 2 + path->replaced_bytes() / 20);

  const auto eager = decode(fp8, InferenceCudaGraphScope::kNone);
  EXPECT_EQ(decode(fp8, InferenceCudaGraphScope::kNone), eager) << "eager FP8 decode is not reproducible";
  for (const auto scope : {InferenceCudaGraphScope::kLayer, InferenceCudaGraphScope::kBlock}) {
    EXPECT_EQ(decode(fp8, scope), eager) << config::to_string(scope);
  }

  const at::Tensor input =
      at::arange(40, at::TensorOptions().dtype(at::kLong).device(at::kCUDA)).view({1, -1}) * 11 % 512;
  const at::Tensor want = bf16->logits(input).to(at::kDouble);
  const at::Tensor got = fp8->logits(input).to(at::kDouble);
  const double error = ((got - want).norm() / want.norm()).item<double>();
  std::cout << "FP8 logits against bf16: relative error " << error << "\n";
  EXPECT_LT(error, 0.1);
}

}  // namespace
}  // namespace graphed::infer
