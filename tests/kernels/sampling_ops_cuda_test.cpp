// tests/kernels/sampling_ops_cuda_test.cpp — the sampler's draw on the GPU (kernels/gumbel_max.cu) against the CPU
// loop of kernels/sampling_ops.cpp on the same inputs: a vocabulary of 50,257 ids in rows of 50,304 (a padded
// table), greedy, tempered and thresholded rows side by side, logits from nearly flat to peaked; the same tokens
// on every run, and captured in a CUDA graph the same tokens as eager while the draw index moves on. The logits
// hold exact ties, -inf columns and a row with NaNs, where the pruning and the keys' order matter most.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <limits>
#include <vector>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda_test.h"
#include "graphed/kernels/sampling_ops.h"

namespace graphed::kernels {
namespace {

using GumbelMaxCudaTest = graphed::testing::CudaTest;

constexpr int64_t kRows = 12;

/// Rows of every kind: greedy, tempered at 0.5 to 1.5, and every third one cut at its median (the columns tied with
/// it kept up to column 25,000).
GumbelRows row_settings(const at::Tensor& logits, int64_t first_draw) {
  std::vector<double> temperature;
  std::vector<int64_t> seeds, draws;
  for (int64_t row = 0; row < kRows; ++row) {
    temperature.push_back(row % 4 == 0 ? 0.0 : 0.5 + 0.25 * static_cast<double>(row % 5));
    seeds.push_back(static_cast<int64_t>(noise_seed_state(1000 + static_cast<uint64_t>(row))));
    draws.push_back(first_draw + row);
  }
  GumbelRows rows;
  rows.temperature = at::tensor(temperature, at::kDouble);
  rows.seed_state = at::tensor(seeds, at::kLong);
  rows.draw = at::tensor(draws, at::kLong);
  const at::Tensor third = at::arange(kRows, at::kLong).remainder(3).eq(2);
  const at::Tensor median =
      std::get<0>((logits.cpu() / rows.temperature.clamp_min(0.5).to(at::kFloat).unsqueeze(1)).median(1));
  rows.threshold = at::where(third, median, at::full_like(median, -INFINITY));
  rows.threshold_column = at::full({kRows}, 25000, at::kLong);
  return rows;
}

/// Logits of `spread` with what a model can produce besides: runs of exact ties at the top (bf16 logits tie),
/// -inf columns (masked ids), and one row holding NaNs (a NaN wins, the first one, as argmax's).
at::Tensor logits_with_ties(double spread) {
  at::Tensor table = at::randn({kRows, 50304}) * spread;
  const at::Tensor top = std::get<0>(table.max(1, /*keepdim=*/true));
  table.narrow(1, 300, 40).copy_(top.expand({kRows, 40}));
  table.narrow(1, 40000, 20).fill_(-INFINITY);
  table[5][777] = NAN;
  table[5][888] = NAN;
  return table;
}

GumbelRows on_device(const GumbelRows& rows) {
  return {rows.temperature.cuda(), rows.threshold.cuda(), rows.threshold_column.cuda(),
          rows.seed_state.cuda(),  rows.draw.cuda(),      rows.row_word_is_index};
}

TEST_F(GumbelMaxCudaTest, TheKernelDrawsWhatTheCpuLoopDraws) {
  at::manual_seed(4);
  for (const double spread : {0.01, 1.0, 3.0, 8.0}) {
    const at::Tensor table = logits_with_ties(spread);
    const at::Tensor logits = table.narrow(1, 0, 50257);
    for (int64_t first_draw = 0; first_draw < 40; first_draw += 13) {
      const GumbelRows rows = row_settings(logits, first_draw);
      at::Tensor on_cpu = at::empty({kRows}, at::kLong);
      gumbel_max_into(logits, rows, on_cpu);
      const at::Tensor device_table = table.cuda();
      at::Tensor on_gpu = at::empty({kRows}, at::TensorOptions().device(at::kCUDA).dtype(at::kLong));
      gumbel_max_into(device_table.narrow(1, 0, 50257), on_device(rows), on_gpu);
      EXPECT_TRUE(at::equal(on_gpu.cpu(), on_cpu))
          << "spread " << spread << ", draw " << first_draw << ": " << on_gpu.cpu() << " against " << on_cpu;
      at::Tensor again = at::empty_like(on_gpu);
      gumbel_max_into(device_table.narrow(1, 0, 50257), on_device(rows), again);
      EXPECT_TRUE(at::equal(again, on_gpu));
      EXPECT_TRUE(
          at::equal(on_cpu.index({at::arange(0, kRows, 4)}), logits.argmax(1).index({at::arange(0, kRows, 4)})));
    }
  }
}

TEST_F(GumbelMaxCudaTest, ACapturedDrawMatchesEagerAsTheDrawIndexMovesOn) {
  at::manual_seed(5);
  const at::Tensor logits = (at::randn({kRows, 32000}) * 2.0).cuda();
  GumbelRows rows = on_device(row_settings(logits, 0));
  at::Tensor out = at::empty({kRows}, at::TensorOptions().device(at::kCUDA).dtype(at::kLong));
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStreamGuard guard(stream);
    gumbel_max_into(logits, rows, out);  // warmup on the side stream
    graph.capture_begin();
    gumbel_max_into(logits, rows, out);
    graph.capture_end();
  }
  for (int64_t step = 1; step < 6; ++step) {
    rows.draw.add_(1);
    graph.replay();
    at::Tensor eager = at::empty_like(out);
    gumbel_max_into(logits, rows, eager);
    torch::cuda::synchronize();
    EXPECT_TRUE(at::equal(out, eager)) << "step " << step;
  }
}

/// kernels/top_logprobs.cu against the CPU path (logsumexp and a stable sort) on rows of 50,257 columns narrowed
/// from 50,304, with exact ties across the cut, -inf columns and a row of one value: the same columns in the same
/// order, the log probabilities within float rounding of the partition function, the same bits on a second run.
TEST_F(GumbelMaxCudaTest, TopLogprobsEqualTheCpuSortWithTiesByColumn) {
  at::manual_seed(11);
  const int64_t rows = 9;
  at::Tensor wide = (at::randn({rows, 50304}) * 4).round() / 2;  // many exact ties
  wide[3].fill_(0.25);                                           // every column tied
  wide[4].narrow(0, 0, 40000).fill_(-std::numeric_limits<float>::infinity());
  const at::Tensor logits = wide.narrow(1, 0, 50257);
  for (const int64_t top : {1, 5, 20}) {
    at::Tensor expected_out = at::zeros({rows, 1 + top});
    at::Tensor expected_ids = at::zeros({rows, top}, at::kLong);
    top_logprobs_into(logits, expected_out, expected_ids);
    const at::Tensor gpu_logits = wide.cuda().narrow(1, 0, 50257);
    at::Tensor out = at::zeros({rows, 1 + top}, at::device(at::kCUDA));
    at::Tensor ids = at::zeros({rows, top}, at::device(at::kCUDA).dtype(at::kLong));
    top_logprobs_into(gpu_logits, out, ids);
    EXPECT_TRUE(at::equal(ids.cpu(), expected_ids)) << "top " << top;
    EXPECT_TRUE(at::allclose(out.cpu(), expected_out, 1e-5, 1e-5)) << "top " << top;
    at::Tensor again = at::zeros_like(out);
    at::Tensor again_ids = at::zeros_like(ids);
    top_logprobs_into(gpu_logits, again, again_ids);
    EXPECT_TRUE(at::equal(again, out) && at::equal(again_ids, ids));
  }
}

}  // namespace
}  // namespace graphed::kernels
