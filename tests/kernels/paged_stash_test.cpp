// tests/kernels/paged_stash_test.cpp — the paged stash on the CPU (the same ATen ops as on a GPU): the profiling
// iteration keeps only the real rows and sizes the pools; then only the real rows are parked and come back (the rest
// zero), pages are reused across puts and iterations, a full pool marks the stash overflowed, and a negative factor
// sizes from the real rows measured.
#include <gtest/gtest.h>

#include "graphed/kernels/paged_stash.h"

namespace graphed::kernels {
namespace {

at::Tensor count(int64_t rows) { return at::tensor(rows, at::kLong); }

/// The first `real` rows of `tensor`, the others zero.
at::Tensor real_rows_only(const at::Tensor& tensor, int64_t real) {
  at::Tensor expected = at::zeros_like(tensor);
  expected.narrow(0, 0, real).copy_(tensor.narrow(0, 0, real));
  return expected;
}

TEST(PagedStashTest, ProfilingKeepsTensorsWholeThenOnlyRealRowsComeBack) {
  PagedStashOptions options;
  options.page_rows = 4;
  PagedStash stash(options);
  const at::Tensor first = at::randn({10, 3});
  const at::Tensor second = at::randn({10, 2, 5}).to(at::kBFloat16);  // another type and shape, one row width
  stash.begin_iteration();                                            // nothing seen yet: nothing to size
  EXPECT_FALSE(stash.sized());
  const StashedRows whole = stash.put({first, second}, count(6), /*balanced_rows=*/5);
  EXPECT_EQ(whole.whole[0].size(0), 6) << "profiling keeps the real rows only";
  const auto back_whole = stash.take(whole);
  EXPECT_TRUE(at::equal(back_whole[0], real_rows_only(first, 6)));
  EXPECT_TRUE(at::equal(back_whole[1], real_rows_only(second, 6)));
  // Where the rows may not be read on the host (a capture), the profile keeps and counts all of them.
  const StashedRows unread = stash.put({first, second}, count(6), 5, /*may_read_host=*/false);
  EXPECT_TRUE(at::equal(stash.take(unread)[0], first));

  stash.begin_iteration();  // sizes: 1.1 x 5 rows -> 2 pages, and a page for the one put alive at the peak
  ASSERT_TRUE(stash.sized());
  EXPECT_EQ(stash.pool_bytes(), (3 * 4 + 4 + 1) * (3 * 4 + 10 * 2));
  const StashedRows parked = stash.put({first, second}, count(6), 5);
  EXPECT_TRUE(parked.whole.empty());
  EXPECT_EQ(parked.page_count.item<int64_t>(), 2);
  const auto back = stash.take(parked);
  EXPECT_TRUE(at::equal(back[0], real_rows_only(first, 6)));
  EXPECT_TRUE(at::equal(back[1], real_rows_only(second, 6)));
  EXPECT_EQ(back[1].scalar_type(), at::kBFloat16);
  EXPECT_EQ(back[1].sizes(), second.sizes());
  EXPECT_EQ(stash.overflowed().item<int64_t>(), 0);
}

TEST(PagedStashTest, PagesComeBackForLaterPutsAndIterations) {
  PagedStashOptions options;
  options.page_rows = 2;
  options.size_factor = 1.0;
  PagedStash stash(options);
  // Profiling: two layers alive at once at the peak, 4 balanced rows each: 4 pages + 2.
  const at::Tensor a = at::randn({6, 3});
  const at::Tensor b = at::randn({6, 3});
  const StashedRows pa = stash.put({a}, count(4), 4);
  const StashedRows pb = stash.put({b}, count(4), 4);
  stash.take(pb);
  stash.take(pa);
  for (int iteration = 0; iteration < 3; ++iteration) {
    stash.begin_iteration();
    // Forward of two layers, backward in reverse, then a third put that reuses what they returned.
    const at::Tensor x = at::randn({6, 3});
    const at::Tensor y = at::randn({6, 3});
    const StashedRows px = stash.put({x}, count(5), 4);  // 3 pages
    const StashedRows py = stash.put({y}, count(3), 4);  // 2 pages
    EXPECT_TRUE(at::equal(stash.take(py)[0], real_rows_only(y, 3)));
    const at::Tensor z = at::randn({6, 3});
    const StashedRows pz = stash.put({z}, count(6), 4);  // 3 pages: 6 in use of 6
    EXPECT_TRUE(at::equal(stash.take(px)[0], real_rows_only(x, 5)));
    EXPECT_TRUE(at::equal(stash.take(pz)[0], z));
    EXPECT_EQ(stash.overflowed().item<int64_t>(), 0) << "iteration " << iteration;
  }
}

TEST(PagedStashTest, AFullPoolMarksTheStashOverflowedAndParksNothingMore) {
  PagedStashOptions options;
  options.page_rows = 2;
  options.size_factor = 1.0;
  PagedStash stash(options);
  stash.take(stash.put({at::randn({8, 2})}, count(2), 2));
  stash.begin_iteration();  // 1 page + 1
  const at::Tensor fits = at::randn({8, 2});
  const StashedRows first = stash.put({fits}, count(4), 2);
  const at::Tensor too_many = at::randn({8, 2});
  const StashedRows second = stash.put({too_many}, count(2), 2);
  EXPECT_EQ(stash.overflowed().item<int64_t>(), 1);
  EXPECT_EQ(second.page_count.item<int64_t>(), 0);
  EXPECT_TRUE(at::equal(stash.take(second)[0], at::zeros_like(too_many)));
  EXPECT_TRUE(at::equal(stash.take(first)[0], real_rows_only(fits, 4)));
  // Once overflowed, even a put that would fit parks nothing.
  const StashedRows third = stash.put({at::randn({8, 2})}, count(1), 2);
  EXPECT_EQ(third.page_count.item<int64_t>(), 0);
  stash.begin_iteration();  // the next iteration starts empty and not overflowed
  EXPECT_EQ(stash.overflowed().item<int64_t>(), 0);
  const at::Tensor again = at::randn({8, 2});
  EXPECT_TRUE(at::equal(stash.take(stash.put({again}, count(3), 2))[0], real_rows_only(again, 3)));
}

TEST(PagedStashTest, ANegativeFactorSizesFromTheRealRowsMeasured) {
  PagedStashOptions options;
  options.page_rows = 4;
  options.size_factor = -1.0;
  PagedStash stash(options);
  // Balanced 2 rows each, but 9 and 7 real rows alive at once: 16 rows -> 4 pages, + 2 for the puts alive.
  const StashedRows first = stash.put({at::randn({12, 1})}, count(9), 2);
  const StashedRows second = stash.put({at::randn({12, 1})}, count(7), 2);
  stash.take(second);
  stash.take(first);
  stash.begin_iteration();
  EXPECT_EQ(stash.pool_bytes(), (6 * 4 + 4 + 1) * 4);
  const at::Tensor a = at::randn({12, 1});
  const at::Tensor b = at::randn({12, 1});
  const StashedRows pa = stash.put({a}, count(9), 2);
  const StashedRows pb = stash.put({b}, count(7), 2);
  EXPECT_EQ(stash.overflowed().item<int64_t>(), 0);
  EXPECT_TRUE(at::equal(stash.take(pb)[0], real_rows_only(b, 7)));
  EXPECT_TRUE(at::equal(stash.take(pa)[0], real_rows_only(a, 9)));
}

}  // namespace
}  // namespace graphed::kernels
