// tests/infer/step_inputs_test.cpp — a serving step's inputs as the device reads them: token ids, with a token
// still in flight named by its row in the previous step's drawn tokens (async scheduling); positions, cache slots
// and requests of every token, padding included; each request's draw index; and, for a shape with prompt tokens,
// the split kernel's decode count and the tile kernel's plan, which together cover every token once; the plan of a
// step's views, and another rank's views of the same packed inputs with it.
#include "graphed/infer/step_inputs.h"

#include <gtest/gtest.h>

#include <vector>

#include "graphed/kernels/prefill_tiles.h"

namespace graphed::infer {
namespace {

constexpr int64_t kInputsBlockSize = 4;

Request made_request(int64_t id, std::vector<int64_t> tokens, int64_t prompt_length, std::vector<int64_t> blocks) {
  Request made;
  made.id = id;
  made.tokens = std::move(tokens);
  made.prompt_length = prompt_length;
  made.blocks = std::move(blocks);
  made.state_slot = id;
  return made;
}

std::vector<int64_t> host_values(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.contiguous().view(-1);
  return std::vector<int64_t>(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
}

class StepInputsTest : public ::testing::Test {
 protected:
  StepInputsTest() : inputs(64, 8, 8, 4, at::TensorOptions().dtype(at::kFloat), 64) {}

  /// Two decoding requests (b's token in flight at row 1 of the step before) and a 20-token chunk of c's prompt
  /// from position 5, padded to 32 tokens and 4 requests.
  Schedule mixed() {
    a = made_request(1, {11, 12, 13, 14, 15, 16}, 5, {3, 4});
    a.computed = 6;
    b = made_request(2, {21, 22, 23}, 2, {5});
    b.in_flight = 1;  // its fourth token is still on the device
    b.in_flight_row = 1;
    b.computed = 4;
    std::vector<int64_t> prompt(25);
    for (int64_t i = 0; i < 25; ++i) prompt[static_cast<std::size_t>(i)] = 100 + i;
    c = made_request(3, prompt, 25, {6, 7, 8, 9, 10, 11, 12});
    Schedule schedule;
    schedule.chunks = {{&a, 5, 1, true, true}, {&b, 3, 1, true, true}, {&c, 5, 20, false, false}};
    return schedule;
  }

  StepInputs inputs;
  Request a, b, c;
};

TEST_F(StepInputsTest, ATokenInFlightIsReadFromThePreviousStepsRow) {
  const Schedule schedule = mixed();
  inputs.load(schedule, 32, 4, kInputsBlockSize);
  const StepViews views = inputs.views(plan_views(schedule, 32, 4, true, 64), 32, 4, true);
  const auto ids = host_values(views.token_ids);
  const auto source = host_values(views.token_source);
  EXPECT_EQ(ids[0], 16);  // a's last token, known on the host
  EXPECT_EQ(source[0], -1);
  EXPECT_EQ(ids[1], 0);  // b's is not: row 1 of the previous step's drawn tokens
  EXPECT_EQ(source[1], 1);
  EXPECT_EQ(ids[2], 105);
  EXPECT_EQ(source[2], -1);
  const auto positions = host_values(views.batch.context.positions);
  const auto slots = host_values(views.batch.slots);
  EXPECT_EQ(positions[1], 3);
  EXPECT_EQ(slots[1], 5 * kInputsBlockSize + 3);
  EXPECT_EQ(positions[21], 24);
  EXPECT_EQ(slots[21], 12 * kInputsBlockSize + 0);
  EXPECT_EQ(slots[31], 0);  // padding writes to the padding block
  // b draws its fifth token's index counting the one in flight; padding requests draw greedily from nothing.
  EXPECT_EQ(host_values(views.sampling.draw), (std::vector<int64_t>{1, 2, 0, 0}));
}

TEST_F(StepInputsTest, TheSplitKernelsDecodesAndTheTilesCoverEveryTokenOnce) {
  const Schedule schedule = mixed();
  inputs.load(schedule, 32, 4, kInputsBlockSize);
  const StepViews views = inputs.views(plan_views(schedule, 32, 4, true, 64), 32, 4, true);
  const kernels::PagedContext& context = views.batch.context;
  ASSERT_TRUE(context.tiles.defined());
  EXPECT_EQ(host_values(context.split_count), std::vector<int64_t>{2});
  EXPECT_EQ(context.split_bound, 4);
  EXPECT_EQ(context.tiles.size(0), kernels::max_prefill_tiles(32, 4));
  const auto tiles = host_values(context.tiles);
  const auto requests = host_values(context.token_request);
  std::vector<int> covered(32, 0);
  for (int64_t row = 0; row < context.tiles.size(0); ++row) {
    const int64_t* tile = tiles.data() + row * kernels::kPrefillTileFields;
    EXPECT_LE(tile[3], kernels::kPrefillTileTokens);
    for (int64_t t = tile[0]; t < tile[0] + tile[3]; ++t) {
      ++covered[static_cast<std::size_t>(t)];
      EXPECT_EQ(requests[static_cast<std::size_t>(t)], tile[1]) << "token " << t << " of tile " << row;
    }
  }
  for (int64_t t = 0; t < 32; ++t) EXPECT_EQ(covered[static_cast<std::size_t>(t)], t < 2 ? 0 : 1) << "token " << t;
  // c's chunk: 16 tokens from position 5, then 4 from 21; the 10 padding tokens, all the last request's.
  EXPECT_EQ(std::vector<int64_t>(tiles.begin(), tiles.begin() + 12),
            (std::vector<int64_t>{2, 2, 5, 16, 18, 2, 21, 4, 22, 3, 0, 10}));
}

TEST_F(StepInputsTest, ADecodeOnlyShapeHasNoTilesAndAnEagerStepDenseSegments) {
  Schedule schedule = mixed();
  schedule.chunks.pop_back();
  inputs.load(schedule, 4, 4, kInputsBlockSize);
  const StepViews decode_only = inputs.views(plan_views(schedule, 4, 4, true, 64), 4, 4, true);
  EXPECT_FALSE(decode_only.batch.context.tiles.defined());
  EXPECT_EQ(decode_only.batch.decode_tokens, 4);  // padding tokens too
  const Schedule whole = mixed();
  inputs.load(whole, 22, 3, kInputsBlockSize);
  const StepViews eager = inputs.views(plan_views(whole, 22, 3, false, 64), 22, 3, false);
  EXPECT_FALSE(eager.batch.context.tiles.defined());
  EXPECT_EQ(eager.batch.decode_tokens, 2);
  EXPECT_EQ(eager.batch.context.max_context, 25);  // the step's own: c's chunk reaches position 24
  ASSERT_EQ(eager.batch.segments.size(), 1u);
  EXPECT_EQ(eager.batch.segments[0].request, 2);
  EXPECT_EQ(eager.batch.segments[0].first_token, 2);
  EXPECT_EQ(eager.batch.segments[0].length, 20);
  EXPECT_EQ(eager.batch.segments[0].first_position, 5);
}

TEST_F(StepInputsTest, APlanFromTheScheduleAndPackedInputsGiveAnotherRankTheSameViews) {
  const Schedule schedule = mixed();
  inputs.load(schedule, 32, 4, kInputsBlockSize);
  const ViewPlan plan = plan_views(schedule, 32, 4, true, 64);
  EXPECT_EQ(plan.decode_tokens, 2);
  EXPECT_EQ(plan.max_context, 64);
  EXPECT_TRUE(plan.segments.empty());
  const StepViews loaded = inputs.views(plan, 32, 4, true);
  // Another rank's inputs: the packed buffer copied over, no schedule, no load.
  StepInputs follower(64, 8, 8, 4, at::TensorOptions().dtype(at::kFloat), 64);
  const at::Tensor packed = inputs.packed_inputs(32, 4);
  EXPECT_LT(packed.numel(), inputs.packed_inputs(64, 8).numel());  // only what a step of this shape reads
  follower.packed_inputs(32, 4).copy_(packed);
  follower.set_block_size(kInputsBlockSize);
  const StepViews followed = follower.views(plan, 32, 4, true);
  EXPECT_EQ(host_values(followed.token_ids), host_values(loaded.token_ids));
  EXPECT_EQ(host_values(followed.token_source), host_values(loaded.token_source));
  EXPECT_EQ(host_values(followed.batch.slots), host_values(loaded.batch.slots));
  EXPECT_EQ(host_values(followed.batch.context.block_tables), host_values(loaded.batch.context.block_tables));
  EXPECT_EQ(host_values(followed.batch.context.tiles), host_values(loaded.batch.context.tiles));
  EXPECT_EQ(host_values(followed.sampling.seed_state), host_values(loaded.sampling.seed_state));
  EXPECT_EQ(followed.batch.block_size, kInputsBlockSize);
  EXPECT_EQ(followed.batch.decode_tokens, loaded.batch.decode_tokens);
  EXPECT_EQ(followed.batch.context.max_context, loaded.batch.context.max_context);
}

}  // namespace
}  // namespace graphed::infer
