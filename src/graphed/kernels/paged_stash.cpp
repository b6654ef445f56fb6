// kernels/paged_stash.cpp — see kernels/paged_stash.h. ATen ops on the stash's device, none of which reads a value on
// the host once the pools exist.
#include "graphed/kernels/paged_stash.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "graphed/util/error.h"

namespace graphed::kernels {

PagedStash::PagedStash(const PagedStashOptions& options) : options_(options) {
  GRAPHED_INTERNAL_ASSERT(options.page_rows >= 1 && options.size_factor != 0.0, "a paged stash of ", options.page_rows,
                          " rows a page and size factor ", options.size_factor);
}

StashedRows PagedStash::put(const std::vector<at::Tensor>& tensors, const at::Tensor& rows, int64_t balanced_rows,
                            bool may_read_host) {
  GRAPHED_INTERNAL_ASSERT(!tensors.empty(), "a put of no tensors");
  const int64_t r = tensors.front().size(0);
  StashedRows stashed;
  stashed.balanced_rows = balanced_rows;
  for (const at::Tensor& tensor : tensors) {
    GRAPHED_INTERNAL_ASSERT(tensor.size(0) == r && tensor.is_contiguous(), "a stashed tensor ", tensor.sizes(),
                            " beside ", r, " rows");
    stashed.types.push_back(tensor.scalar_type());
    stashed.sizes.push_back(tensor.sizes().vec());
    stashed.widths.push_back(r == 0 ? 0 : tensor.numel() / r * static_cast<int64_t>(tensor.element_size()));
    stashed.width += stashed.widths.back();
  }
  const auto pool_of = pools_.find(stashed.width);
  // Before the pools exist (or for a width the profiling never saw) the tensors stay whole.
  const bool fits_units =
      pool_of != pools_.end() && std::all_of(stashed.widths.begin(), stashed.widths.end(),
                                             [&](int64_t width) { return width % pool_of->second.unit == 0; });
  if (!sized_ || !fits_units || r == 0) return keep_whole(tensors, rows, may_read_host, stashed);
  Pool& pool = pool_of->second;
  const at::ScalarType unit_type = pool.storage.scalar_type();
  const int64_t page = options_.page_rows;
  const at::Tensor real = rows.to(at::kLong).reshape({});
  const auto index = real.options();
  // The pages: as many as the real rows fill, from the free list's head, if the pool has that many free and nothing
  // overflowed before; else none, and the stash is marked overflowed.
  const at::Tensor needed = at::div(real + (page - 1), page, "floor");
  const at::Tensor room = pool.pages - (pool.ends.select(0, 0) - pool.ends.select(0, 1));
  const at::Tensor fits = (needed <= room).logical_and(overflowed_ == 0);
  overflowed_.copy_(at::maximum(overflowed_, (needed > room).to(at::kLong)));
  stashed.page_count = needed * fits.to(at::kLong);
  const int64_t most_pages = (r + page - 1) / page;
  const at::Tensor slots = at::remainder(pool.ends.select(0, 0) + at::arange(most_pages, index), pool.pages);
  stashed.pages = pool.free_list.index_select(0, slots);
  pool.ends.select(0, 0).add_(stashed.page_count);
  // Real row i goes to row i % page of its page; the other rows to the scratch rows, which nothing reads.
  const at::Tensor row = at::arange(r, index);
  const at::Tensor in_page = at::remainder(row, page);
  const at::Tensor paged = stashed.pages.index_select(0, at::div(row, page, "floor")) * page + in_page;
  stashed.place = at::where(row < real * fits.to(at::kLong), paged, in_page + pool.pages * page);
  int64_t column = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor units = tensors[i].reshape({r, -1}).view(at::kByte).view(unit_type);
    pool.storage.narrow(1, column, units.size(1)).index_copy_(0, stashed.place, units);
    column += units.size(1);
  }
  return stashed;
}

StashedRows PagedStash::keep_whole(const std::vector<at::Tensor>& tensors, const at::Tensor& rows, bool may_read_host,
                                   StashedRows stashed) {
  const int64_t r = tensors.front().size(0);
  if (sized_) {  // a width the profiling never saw: nothing to count, nothing read
    stashed.whole = tensors;
    stashed.real_rows = r;
    return stashed;
  }
  // The profiling iteration runs eagerly: its one read a put tells the real rows, and only they are kept.
  stashed.real_rows = may_read_host ? std::min(r, rows.to(at::kLong).item<int64_t>()) : r;
  for (const at::Tensor& tensor : tensors) stashed.whole.push_back(tensor.narrow(0, 0, stashed.real_rows).clone());
  Profile& profile = profiles_[stashed.width];
  profile.device = tensors.front().device();
  for (const int64_t width : stashed.widths) profile.unit = std::gcd(profile.unit, width);
  profile.balanced_alive += stashed.balanced_rows;
  profile.balanced_peak = std::max(profile.balanced_peak, profile.balanced_alive);
  profile.real_alive += stashed.real_rows;
  profile.real_peak = std::max(profile.real_peak, profile.real_alive);
  profile.puts_peak = std::max(profile.puts_peak, ++profile.puts_alive);
  return stashed;
}

std::vector<at::Tensor> PagedStash::take(const StashedRows& stashed) {
  if (!stashed.whole.empty()) {
    const auto profile = profiles_.find(stashed.width);
    if (!sized_ && profile != profiles_.end()) {
      profile->second.balanced_alive -= stashed.balanced_rows;
      profile->second.real_alive -= stashed.real_rows;
      --profile->second.puts_alive;
    }
    std::vector<at::Tensor> tensors;
    for (std::size_t i = 0; i < stashed.whole.size(); ++i) {
      const at::Tensor& kept = stashed.whole[i];
      if (kept.sizes() == at::IntArrayRef(stashed.sizes[i])) {
        tensors.push_back(kept);
        continue;
      }
      at::Tensor padded = at::zeros(stashed.sizes[i], kept.options());  // the rows not kept come back zero
      padded.narrow(0, 0, kept.size(0)).copy_(kept);
      tensors.push_back(padded);
    }
    return tensors;
  }
  Pool& pool = pools_.at(stashed.width);
  const int64_t page = options_.page_rows;
  // Rows not parked read the zero row after the scratch rows.
  const at::Tensor source = at::where(stashed.place < pool.pages * page, stashed.place,
                                      at::full_like(stashed.place, pool.pages * page + page));
  std::vector<at::Tensor> tensors;
  int64_t column = 0;
  for (std::size_t i = 0; i < stashed.widths.size(); ++i) {
    const int64_t units = stashed.widths[i] / pool.unit;
    const at::Tensor kept = pool.storage.narrow(1, column, units).index_select(0, source);
    tensors.push_back(kept.view(at::kByte).view(stashed.types[i]).view(stashed.sizes[i]));
    column += units;
  }
  // The pages back to the free list after its last free page; the slots of pages not taken take discards.
  const at::Tensor slot = at::arange(stashed.pages.size(0), stashed.pages.options());
  const at::Tensor slots =
      at::where(slot < stashed.page_count, at::remainder(pool.ends.select(0, 1) + slot, pool.pages),
                at::full_like(slot, pool.pages));
  pool.free_list.index_copy_(0, slots, stashed.pages);
  pool.ends.select(0, 1).add_(stashed.page_count);
  return tensors;
}

void PagedStash::size_pools() {
  const int64_t page = options_.page_rows;
  for (const auto& [width, profile] : profiles_) {
    const double peak = static_cast<double>(options_.size_factor > 0.0 ? profile.balanced_peak : profile.real_peak);
    const auto rows = static_cast<int64_t>(std::ceil(peak * std::abs(options_.size_factor)));
    // Each parked tensor may leave its last page part empty: a page more for every put alive at the peak.
    Pool pool;
    pool.pages = std::max<int64_t>(1, (rows + page - 1) / page + profile.puts_peak);
    const auto bytes = at::TensorOptions().device(profile.device).dtype(at::kByte);
    pool.unit = profile.unit;
    const at::ScalarType unit_type = pool.unit == 8   ? at::kLong
                                     : pool.unit == 4 ? at::kInt
                                     : pool.unit == 2 ? at::kShort
                                                      : at::kByte;
    pool.storage = at::empty({pool.pages * page + page + 1, width / pool.unit}, bytes.dtype(unit_type));
    pool.storage.narrow(0, pool.pages * page + page, 1).zero_();
    pool.all_free = at::arange(pool.pages + 1, bytes.dtype(at::kLong));
    pool.free_list = pool.all_free.clone();
    pool.ends = at::zeros({2}, bytes.dtype(at::kLong));
    pools_.emplace(width, std::move(pool));
    if (!overflowed_.defined()) overflowed_ = at::zeros({}, bytes.dtype(at::kLong));
  }
  profiles_.clear();
}

void PagedStash::begin_iteration() {
  if (!sized_ && !profiles_.empty()) {
    size_pools();
    sized_ = true;
  }
  for (auto& [width, pool] : pools_) {
    pool.free_list.copy_(pool.all_free);
    pool.ends.zero_();
  }
  if (overflowed_.defined()) overflowed_.zero_();
}

int64_t PagedStash::pool_bytes() const {
  int64_t bytes = 0;
  for (const auto& [width, pool] : pools_) bytes += pool.storage.numel() * pool.unit;
  return bytes;
}

}  // namespace graphed::kernels
