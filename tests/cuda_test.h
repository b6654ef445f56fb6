// tests/cuda_test.h — CudaTest, the fixture of the GPU tests (*_cuda_test.cpp): it skips each test, with the one
// message, where LibTorch sees no CUDA device. CudaTestWithParam is its TEST_P form. Skip conditions of one file
// (FP8 tensor cores, two GPUs, transformers importable) stay in that file, in a fixture derived from these.
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>

namespace graphed::testing {

/// Skips each test where torch::cuda::is_available() is false. A suite needing nothing more names it:
/// `using TrainerCudaTest = graphed::testing::CudaTest;`, then TEST_F(TrainerCudaTest, ...). A fixture that sets
/// up more derives from it and starts its SetUp with `CudaTest::SetUp(); if (IsSkipped()) return;`: GTEST_SKIP()
/// returns only from the function it is written in, so without that check the derived SetUp would go on to use
/// the missing device.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch";
  }
};

/// CudaTest for TEST_P, as ::testing::TestWithParam is ::testing::Test for it: a suite names it with its parameter,
/// `using LocalGraphsCudaTest = graphed::testing::CudaTestWithParam<GraphCase>;`, then TEST_P and
/// INSTANTIATE_TEST_SUITE_P on that name.
template <typename Param>
class CudaTestWithParam : public CudaTest, public ::testing::WithParamInterface<Param> {};

}  // namespace graphed::testing
