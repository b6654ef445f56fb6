// tests/capture/cuda_graph_manager_test.cpp — the local implementation's managers on the CPU, where
// everything up to the capture runs: eager phase, the record of one iteration (forwards in call order,
// backwards in reverse), runner reuse across microbatches (research §2.4), a second runner for an
// overlapping schedule or another argument signature, calls inside another capture, calls without
// grad, delete, and the error when asked to capture off the GPU. Toy units only.
#include "graphed/capture/cuda_graph_manager.h"

#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "capture/toy_units.h"
#include "error_text.h"
#include "graphed/capture/capture_state.h"
#include "graphed/capture/graph_registry.h"

namespace graphed::capture {
namespace {

using graphed::testing::linear_unit;

class CudaGraphManagerTest : public ::testing::Test {
 protected:
  CudaGraphManagerTest() {
    at::manual_seed(0);
    for (int i = 0; i < 2; ++i) {
      weights_.push_back(at::randn({8, 8}).requires_grad_());
      biases_.push_back(at::randn({8}).requires_grad_());
    }
    a_ = std::make_unique<CudaGraphManager>(linear_unit("a", weights_[0], biases_[0]), registry_);
    b_ = std::make_unique<CudaGraphManager>(linear_unit("b", weights_[1], biases_[1]), registry_);
  }
  /// b(a(x)), its forward only.
  at::Tensor forward(const at::Tensor& x) { return b_->run({a_->run({x}, 0)[0]}, 0)[0]; }
  at::Tensor input(int64_t rows = 4) const { return at::randn({rows, 8}).requires_grad_(); }
  std::vector<std::pair<bool, std::string>> entries() const {
    std::vector<std::pair<bool, std::string>> result;
    for (const RecordEntry& entry : registry_.record().entries()) {
      result.emplace_back(entry.forward, entry.runner == a_->training_runner(0).id() ? "a" : "b");
    }
    return result;
  }

  GraphRegistry registry_{at::Device(at::kCPU), LocalGraphOptions()};
  std::vector<at::Tensor> weights_, biases_;
  std::unique_ptr<CudaGraphManager> a_, b_;
};

TEST_F(CudaGraphManagerTest, EagerPhaseRunsTheUnitsWithoutRunners) {
  const at::Tensor x = input();
  const at::Tensor expected =
      linear_unit("b", weights_[1], biases_[1]).forward({linear_unit("a", weights_[0], biases_[0]).forward({x})[0]})[0];
  EXPECT_TRUE(at::equal(forward(x), expected));
  EXPECT_EQ(a_->training_runner_count() + b_->training_runner_count(), 0);
  EXPECT_TRUE(registry_.record().empty());
}

TEST_F(CudaGraphManagerTest, RecordsForwardsInCallOrderAndBackwardsInReverse) {
  registry_.start_recording();
  forward(input()).sum().backward();
  EXPECT_EQ(entries(),
            (std::vector<std::pair<bool, std::string>>{{true, "a"}, {true, "b"}, {false, "b"}, {false, "a"}}));
  EXPECT_TRUE(a_->training_runner(0).is_ready_for_forward()) << "its backward ran";
  // b's argument is a's output: one buffer for both graphs.
  const LocalBufferPlan plan = plan_local_buffers(registry_.record());
  const PlannedInput& b_input = plan.inputs.at(b_->training_runner(0).id())[0];
  EXPECT_EQ(b_input.source, InputSource::kOutput);
  EXPECT_EQ(b_input.producer, a_->training_runner(0).id());
}

TEST_F(CudaGraphManagerTest, MicrobatchesReuseTheRunnersOfTheFirst) {
  registry_.start_recording();
  for (int microbatch = 0; microbatch < 4; ++microbatch) forward(input()).sum().backward();
  EXPECT_EQ(a_->training_runner_count(), 1);
  EXPECT_EQ(b_->training_runner_count(), 1);
  EXPECT_EQ(registry_.record().entries().size(), 4u) << "only the first use of each runner is recorded";
}

TEST_F(CudaGraphManagerTest, OverlappingForwardsGetASecondRunner) {
  registry_.start_recording();
  const at::Tensor first = forward(input());
  const at::Tensor second = forward(input());  // the first one's backward is still pending
  EXPECT_FALSE(a_->training_runner(0).is_ready_for_forward());
  (first.sum() + second.sum()).backward();
  EXPECT_EQ(a_->training_runner_count(), 2);
  EXPECT_EQ(b_->training_runner_count(), 2);
  EXPECT_EQ(registry_.record().entries().size(), 8u);
  EXPECT_TRUE(a_->training_runner(1).is_ready_for_forward());
}

TEST_F(CudaGraphManagerTest, AnotherSignatureWhileRecordingGetsItsOwnRunner) {
  registry_.start_recording();
  forward(input(4)).sum().backward();
  forward(input(2)).sum().backward();
  forward(input(4)).sum().backward();
  EXPECT_EQ(a_->training_runner_count(), 2) << "one runner per argument shape";
  EXPECT_TRUE(a_->training_runner(0).mismatches(std::vector<at::Tensor>{input(4)}).empty());
  EXPECT_EQ(a_->training_runner(0).mismatches(std::vector<at::Tensor>{input(2)}),
            (std::vector<std::string>{"argument 'x' (argument 0): got [2, 8] Float on cpu, requires grad; recorded "
                                      "[4, 8] Float on cpu, requires grad"}));
}

TEST_F(CudaGraphManagerTest, InsideAnotherCaptureOrWithoutGradTheUnitRunsAsItIs) {
  registry_.start_recording();
  {
    CaptureScope capturing;
    forward(input()).sum().backward();
  }
  {
    at::NoGradGuard no_grad;
    forward(input());
  }
  EXPECT_EQ(a_->training_runner_count() + a_->forward_only_runner_count(), 0);
  EXPECT_TRUE(registry_.record().empty());
}

TEST_F(CudaGraphManagerTest, DeleteForgetsTheRunnersAndRecordsAgain) {
  registry_.start_recording();
  forward(input()).sum().backward();
  registry_.delete_cuda_graphs();
  EXPECT_EQ(a_->training_runner_count(), 0);
  EXPECT_TRUE(registry_.record().empty());
  EXPECT_EQ(registry_.phase(), LocalPhase::kRecording);
  forward(input()).sum().backward();
  EXPECT_EQ(registry_.record().entries().size(), 4u);
}

TEST_F(CudaGraphManagerTest, CreatingGraphsOffTheGpuIsAClearError) {
  registry_.start_recording();
  forward(input()).sum().backward();
  EXPECT_EQ(graphed::testing::error_text<CaptureError>([&] { registry_.create_cudagraphs(); }),
            "the local implementation captures CUDA graphs, but its units run on cpu; fix: run the units on a CUDA "
            "device, or eagerly (without local graphs) on the CPU");
}

TEST_F(CudaGraphManagerTest, ManagersLeaveTheRegistryWhenDestroyed) {
  registry_.start_recording();
  forward(input()).sum().backward();
  EXPECT_EQ(registry_.runner_count(), 2);
  b_.reset();
  EXPECT_EQ(registry_.runner_count(), 1);
}

}  // namespace
}  // namespace graphed::capture
