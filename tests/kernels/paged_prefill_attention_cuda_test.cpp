// tests/kernels/paged_prefill_attention_cuda_test.cpp — paged attention with a step's prompt tokens as tiles (the
// tile kernel, kernels/paged_prefill_attention.h) and its decode tokens through the split kernel in the same call,
// against the float32 reference on the same bf16 inputs: chunks of 1, 15, 17, 100 and 300 tokens starting at
// position 0 and later (their context then holds cached positions before the chunk), contexts over many blocks
// scattered through the cache, blocks of 16 and 256 positions, GQA ratios 1 to 16, head dims 32 to 128, padding
// tokens, unused tile rows. Bits: the same call twice, a chunk's tokens alone or among other tiles, the tiles in
// another order, and a CUDA graph replayed with a new plan. Where the tile kernel does not apply (float32, head dim
// 80) the split kernel takes every token. Tolerance: 2e-2 relative to the largest value (bf16).
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda_test.h"
#include "graphed/kernels/paged_attention_ops.h"
#include "graphed/kernels/prefill_tiles.h"

namespace graphed::kernels {
namespace {

struct Heads {
  int64_t heads, groups, head_dim;
};

/// A request's tokens in the step: positions first..first + length - 1.
struct Span {
  int64_t first, length;
};

/// One step: decode tokens first (one per request), then prompt chunks, then padding tokens.
struct Step {
  at::Tensor query, key_cache, value_cache;
  PagedContext context;
  std::vector<PrefillChunk> chunks;  ///< the planned chunks: prompts and padding
  int64_t max_tiles = 0;
  double scale = 0.0;
};

/// [max_tiles, 4] on the device from the planner, rows in order or reversed (the unused rows stay last).
at::Tensor plan_tiles(const std::vector<PrefillChunk>& chunks, int64_t max_tiles, bool reversed = false) {
  std::vector<int64_t> rows(static_cast<std::size_t>(max_tiles * kPrefillTileFields));
  const int64_t used = fill_prefill_tiles(chunks, max_tiles, rows.data());
  if (reversed) {
    std::vector<int64_t> turned(rows);
    for (int64_t t = 0; t < used; ++t) {
      std::copy_n(rows.begin() + (used - 1 - t) * kPrefillTileFields, kPrefillTileFields,
                  turned.begin() + t * kPrefillTileFields);
    }
    rows = turned;
  }
  return at::tensor(rows, at::kLong).view({max_tiles, kPrefillTileFields}).to(at::kCUDA);
}

/// The block tables of requests with `contexts` positions, from a shuffled pool (block 0, the padding block,
/// left out), plus `padding_requests` rows of zeros; returns [requests, width] and sets `blocks` (cache size).
at::Tensor scattered_tables(const std::vector<int64_t>& contexts, int64_t padding_requests, int64_t block_size,
                            int64_t* blocks) {
  int64_t total = 0, width = 1;
  for (int64_t c : contexts) {
    total += (c + block_size - 1) / block_size;
    width = std::max(width, (c + block_size - 1) / block_size);
  }
  const at::Tensor pool = at::randperm(total, at::kLong) + 1;
  at::Tensor tables = at::zeros({static_cast<int64_t>(contexts.size()) + padding_requests, width}, at::kLong);
  int64_t next = 0;
  for (std::size_t r = 0; r < contexts.size(); ++r) {
    const int64_t count = (contexts[r] + block_size - 1) / block_size;
    tables[static_cast<int64_t>(r)].narrow(0, 0, count).copy_(pool.narrow(0, next, count));
    next += count;
  }
  *blocks = total + 1;
  return tables;
}

Step make_step(const Heads& shape, int64_t block_size, const std::vector<int64_t>& decode,
               const std::vector<Span>& prompts, int64_t padding = 0, at::ScalarType type = at::kBFloat16) {
  std::vector<int64_t> token_request, positions, contexts;
  Step step;
  for (int64_t position : decode) {
    token_request.push_back(static_cast<int64_t>(contexts.size()));
    positions.push_back(position);
    contexts.push_back(position + 1);
  }
  for (const Span& span : prompts) {
    const int64_t request = static_cast<int64_t>(contexts.size());
    step.chunks.push_back({static_cast<int64_t>(positions.size()), request, span.first, span.length});
    for (int64_t i = 0; i < span.length; ++i) {
      token_request.push_back(request);
      positions.push_back(span.first + i);
    }
    contexts.push_back(span.first + span.length);
  }
  if (padding > 0) {  // one padding request, as a padded step's last: its table all zeros, its tokens at 0
    PrefillChunk chunk{static_cast<int64_t>(positions.size()), static_cast<int64_t>(contexts.size()), 0, padding};
    chunk.is_padding = true;
    step.chunks.push_back(chunk);
    token_request.insert(token_request.end(), padding, static_cast<int64_t>(contexts.size()));
    positions.insert(positions.end(), padding, 0);
  }
  const int64_t tokens = static_cast<int64_t>(positions.size());
  const int64_t requests = static_cast<int64_t>(contexts.size()) + (padding > 0 ? 1 : 0);
  int64_t blocks = 0;
  const at::Tensor tables = scattered_tables(contexts, padding > 0 ? 1 : 0, block_size, &blocks);
  const auto options = at::TensorOptions().device(at::kCUDA).dtype(type);
  step.query = at::randn({tokens, shape.heads, shape.head_dim}, options);
  step.key_cache = at::randn({blocks, block_size, shape.groups, shape.head_dim}, options);
  step.value_cache = at::randn({blocks, block_size, shape.groups, shape.head_dim}, options);
  step.context.block_tables = tables.to(at::kCUDA);
  step.context.token_request = at::tensor(token_request, at::kLong).to(at::kCUDA);
  step.context.positions = at::tensor(positions, at::kLong).to(at::kCUDA);
  step.context.max_context = *std::max_element(positions.begin(), positions.end()) + 1;
  step.max_tiles = max_prefill_tiles(tokens, requests);  // more than the chunks use: unused rows too
  step.context.tiles = plan_tiles(step.chunks, step.max_tiles);
  step.context.split_count = at::tensor({static_cast<int64_t>(decode.size())}, at::kLong).to(at::kCUDA);
  step.context.split_bound = std::min(tokens, requests);  // as the engine's bucket: the grid reaches prompt tokens
  step.scale = 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
  return step;
}

at::Tensor attend(const Step& step) {
  return paged_attention(step.query, step.key_cache, step.value_cache, step.context, step.scale);
}

/// Decode tokens at positions 0, 40 and 700; chunks of 1 and 15 from 0, 17 from 37, 100 from 256 (a later chunk
/// crossing a 256 boundary), 300 from 0 and 300 from 500.
Step mixed_step(const Heads& shape, int64_t block_size, at::ScalarType type = at::kBFloat16) {
  return make_step(shape, block_size, {0, 40, 700}, {{0, 1}, {0, 15}, {37, 17}, {256, 100}, {0, 300}, {500, 300}}, 0,
                   type);
}

void expect_matches_reference(const Step& step, const at::Tensor& got, const std::string& what) {
  const at::Tensor want = reference::paged_attention(step.query.to(at::kFloat), step.key_cache.to(at::kFloat),
                                                     step.value_cache.to(at::kFloat), step.context, step.scale);
  const double largest = want.abs().max().item<double>();
  const at::Tensor difference = (got.to(at::kFloat) - want).abs();
  const double worst = difference.max().item<double>();
  EXPECT_LE(worst, 2e-2 * std::max(largest, 1.0))
      << what << ": max difference " << worst << " at token " << difference.amax({1, 2}).argmax().item<int64_t>();
}

const std::vector<Heads> kShapes{{8, 8, 64},  {32, 8, 64}, {16, 2, 128}, {8, 2, 128},
                                 {16, 1, 64}, {12, 4, 96}, {4, 2, 32}};

std::string describe(const Heads& shape, int64_t block_size) {
  return std::to_string(shape.heads) + " heads, " + std::to_string(shape.groups) + " groups, head dim " +
         std::to_string(shape.head_dim) + ", blocks of " + std::to_string(block_size);
}

class PagedPrefillAttentionCudaTest : public graphed::testing::CudaTestWithParam<int64_t> {
 protected:
  void SetUp() override {
    CudaTestWithParam::SetUp();
    if (IsSkipped()) return;
    at::manual_seed(23);
  }
};

TEST_P(PagedPrefillAttentionCudaTest, DecodeTokensAndTilesInOneCallMatchTheReference) {
  for (const Heads& shape : kShapes) {
    const Step step = mixed_step(shape, GetParam());
    expect_matches_reference(step, attend(step), describe(shape, GetParam()));
  }
}

TEST_P(PagedPrefillAttentionCudaTest, PaddingTokensMatchTheReference) {
  const Step step = make_step({32, 8, 64}, GetParam(), {5}, {{0, 20}, {64, 33}}, 21);
  expect_matches_reference(step, attend(step), "a padded step");
}

TEST_P(PagedPrefillAttentionCudaTest, ATokensBitsDependOnNeitherTheOtherTilesNorTheirOrder) {
  for (const Heads& shape : {Heads{32, 8, 64}, Heads{16, 2, 128}}) {
    const Step step = mixed_step(shape, GetParam());
    const at::Tensor full = attend(step);
    EXPECT_TRUE(at::equal(full, attend(step))) << "the same call twice";
    Step reordered = step;
    reordered.context.tiles = plan_tiles(step.chunks, step.max_tiles, true);
    EXPECT_TRUE(at::equal(full, attend(reordered))) << "the tiles in reverse order";
    for (const PrefillChunk& chunk : step.chunks) {
      Step alone = step;  // the chunk's tiles only, after unused rows; the split kernel skips every token
      alone.context.tiles = plan_tiles({chunk}, step.max_tiles, true).flip(0);
      alone.context.split_count = at::zeros({1}, step.context.split_count.options());
      const at::Tensor got = attend(alone);
      EXPECT_TRUE(
          at::equal(got.narrow(0, chunk.first_token, chunk.length), full.narrow(0, chunk.first_token, chunk.length)))
          << describe(shape, GetParam()) << ": the chunk of " << chunk.length << " tokens from position "
          << chunk.first_position << " alone";
    }
  }
}

TEST_P(PagedPrefillAttentionCudaTest, ACapturedGraphTakesANewPlanOnReplay) {
  const Step step = mixed_step({32, 8, 64}, GetParam());
  const at::Tensor eager = attend(step);
  at::cuda::CUDAStream stream = at::cuda::getStreamFromPool();
  at::Tensor captured;
  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStreamGuard guard(stream);
    attend(step);  // warmup on the side stream
    graph.capture_begin();
    captured = attend(step);
    graph.capture_end();
  }
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_TRUE(at::equal(captured, eager));
  // A new plan of the same tokens in the captured buffers: the tiles reversed, the decode tokens' output kept.
  step.context.tiles.copy_(plan_tiles(step.chunks, step.max_tiles, true));
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_TRUE(at::equal(captured, eager));
}

TEST_P(PagedPrefillAttentionCudaTest, WhereTheTileKernelDoesNotApplyTheSplitKernelTakesEveryToken) {
  for (const auto& [shape, type] :
       std::vector<std::pair<Heads, at::ScalarType>>{{{8, 2, 64}, at::kFloat}, {{8, 2, 80}, at::kBFloat16}}) {
    const Step step = mixed_step(shape, GetParam(), type);
    Step without = step;
    without.context.tiles = at::Tensor();
    without.context.split_count = at::Tensor();
    EXPECT_TRUE(at::equal(attend(step), attend(without))) << describe(shape, GetParam());
  }
}

TEST_P(PagedPrefillAttentionCudaTest, AStepOfPromptTokensOnlyHasNoSplitLaunch) {
  Step step = make_step({32, 8, 64}, GetParam(), {}, {{0, 17}, {100, 40}});
  step.context.split_bound = 0;
  expect_matches_reference(step, attend(step), "prompt tokens only");
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, PagedPrefillAttentionCudaTest, ::testing::Values(int64_t{16}, int64_t{256}),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return "block" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace graphed::kernels
