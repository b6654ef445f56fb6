// tests/model/ssd_scan_test.cpp — the chunked (SSD) scan against the recurrence by its definition, in
// float64: outputs, final states and the gradients of every input, for chunk sizes 1 to 16 and lengths
// that are and are not a multiple of the chunk (1, 5, 16, 19), with 4 heads over 2 groups.
#include <gtest/gtest.h>

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "graphed/model/ssd_scan.h"

namespace graphed::model {
namespace {

ScanInputs random_inputs(int64_t length) {
  const auto options = at::TensorOptions().dtype(at::kDouble);
  ScanInputs in;
  in.x = at::randn({2, length, 4, 3}, options).requires_grad_(true);
  in.dt = at::softplus(at::randn({2, length, 4}, options)).detach().requires_grad_(true);
  in.a = (-at::exp(at::randn({4}, options))).detach().requires_grad_(true);
  in.b = at::randn({2, length, 2, 5}, options).requires_grad_(true);
  in.c = at::randn({2, length, 2, 5}, options).requires_grad_(true);
  return in;
}

/// Outputs, final state, then the gradients of x, dt, a, b, c of sum(y * y_weights) + sum(state * s_weights).
std::vector<at::Tensor> run(const ScanOutput& out, const ScanInputs& in, const at::Tensor& y_weights,
                            const at::Tensor& state_weights) {
  const at::Tensor objective = (out.y * y_weights).sum() + (out.final_state * state_weights).sum();
  auto grads = torch::autograd::grad({objective}, {in.x, in.dt, in.a, in.b, in.c});
  std::vector<at::Tensor> all{out.y.detach(), out.final_state.detach()};
  all.insert(all.end(), grads.begin(), grads.end());
  return all;
}

TEST(SsdScanTest, ChunkedScanEqualsTheRecurrenceForwardAndBackward) {
  const char* names[] = {"y", "final state", "grad x", "grad dt", "grad a", "grad b", "grad c"};
  for (const int64_t length : {1, 5, 16, 19}) {
    at::manual_seed(length);
    const ScanInputs in = random_inputs(length);
    const at::Tensor y_weights = at::randn({2, length, 4, 3}, at::kDouble);
    const at::Tensor state_weights = at::randn({2, 4, 3, 5}, at::kDouble);
    const auto want = run(sequential_scan(in), in, y_weights, state_weights);
    for (const int64_t chunk : {1, 4, 8, 16}) {
      const auto got = run(chunked_scan(in, chunk), in, y_weights, state_weights);
      for (std::size_t k = 0; k < want.size(); ++k) {
        EXPECT_TRUE(at::allclose(got[k], want[k], 1e-10, 1e-10))
            << names[k] << ", length " << length << ", chunk " << chunk << ": max difference "
            << (got[k] - want[k]).abs().max().item<double>();
      }
    }
  }
}

TEST(SsdScanTest, ARowAloneEqualsItsPlaceInABatch) {
  at::manual_seed(3);
  at::NoGradGuard no_grad;
  const ScanInputs in = random_inputs(9);
  const at::Tensor batched = chunked_scan(in, 4).y;
  const ScanInputs first{in.x.narrow(0, 0, 1), in.dt.narrow(0, 0, 1), in.a, in.b.narrow(0, 0, 1), in.c.narrow(0, 0, 1)};
  EXPECT_TRUE(at::allclose(chunked_scan(first, 4).y, batched.narrow(0, 0, 1), 1e-12, 1e-12));
}

/// A sequence split in two, the second part started from the first part's final state (what chunked
/// prefill and decode do), gives the outputs and state of one scan over the whole, both ways.
TEST(SsdScanTest, AScanContinuesFromAnInitialState) {
  at::manual_seed(5);
  at::NoGradGuard no_grad;
  const ScanInputs in = random_inputs(11);
  const ScanOutput whole = sequential_scan(in);
  const auto part = [&](int64_t start, int64_t length, const at::Tensor& state) {
    return ScanInputs{in.x.narrow(1, start, length), in.dt.narrow(1, start, length), in.a,
                      in.b.narrow(1, start, length), in.c.narrow(1, start, length),  state};
  };
  for (const int64_t split : {1, 4, 7}) {
    const ScanOutput head = chunked_scan(part(0, split, {}), 4);
    const ScanOutput chunked_tail = chunked_scan(part(split, 11 - split, head.final_state), 4);
    const ScanOutput stepped_tail = sequential_scan(part(split, 11 - split, head.final_state));
    for (const ScanOutput& tail : {chunked_tail, stepped_tail}) {
      EXPECT_TRUE(at::allclose(at::cat({head.y, tail.y}, 1), whole.y, 1e-10, 1e-10)) << "split " << split;
      EXPECT_TRUE(at::allclose(tail.final_state, whole.final_state, 1e-10, 1e-10)) << "split " << split;
    }
  }
}

}  // namespace
}  // namespace graphed::model
