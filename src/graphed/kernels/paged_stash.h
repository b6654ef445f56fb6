// kernels/paged_stash.h — Megatron's paged stash: a pool of pages on the device where tensors of R rows, of which the
// first n are real (n known only on the device), park those n rows between a forward and its backward, so the memory
// kept for the backward follows the real rows rather than R. Pages are taken from and returned to a circular free
// list on the device; nothing is read on the host, so a CUDA graph can hold put and take. A put that finds no room
// parks nothing and marks the stash overflowed (every later put and take is then empty), for the caller to run the
// iteration again without it. The pools are sized from a first, profiling iteration that keeps only the real rows of
// each tensor (read on the host, as Megatron's profiling iteration does) and counts the rows alive at once; one pool
// per row width (in bytes), shared by every put of that width.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::kernels {

struct PagedStashOptions {
  int64_t page_rows = 64;  ///< rows a page holds
  /// The pools' size: > 0, this many times the most rows alive at once had every put been balanced (its
  /// `balanced_rows`); < 0, -factor times the most real rows alive at once, measured in the profiling iteration.
  double size_factor = 1.10;
};

/// What a put parked: the handle take() needs.
struct StashedRows {
  std::vector<at::Tensor> whole;            ///< while profiling: the tensors' real rows (or all of them)
  std::vector<at::ScalarType> types;        ///< each tensor's type
  std::vector<int64_t> widths;              ///< each tensor's row in bytes (its columns' place in the pool's rows)
  std::vector<std::vector<int64_t>> sizes;  ///< each tensor's shape
  int64_t width = 0;                        ///< the pool (by its rows' bytes)
  at::Tensor place;                         ///< [R] int64: the pool row of each real row, the scratch rows else
  at::Tensor pages;                         ///< [most pages] int64: the pages taken
  at::Tensor page_count;                    ///< int64 scalar: pages taken (0 when there was no room)
  int64_t balanced_rows = 0;
  int64_t real_rows = 0;  ///< while profiling: the rows `whole` keeps
};

class PagedStash {
 public:
  explicit PagedStash(const PagedStashOptions& options);

  /// Parks rows [0, rows) of each tensor (each [R, ...] of R rows, contiguous, one device); `rows`: int64 scalar on
  /// that device, at most R; `balanced_rows`: the rows real on a balanced load (the pools' size with a positive
  /// factor). `may_read_host`: whether the profiling iteration may read `rows` on the host (not inside a CUDA-graph
  /// capture; without it the profile counts all R rows and keeps them).
  StashedRows put(const std::vector<at::Tensor>& tensors, const at::Tensor& rows, int64_t balanced_rows,
                  bool may_read_host = true);
  /// The tensors back (rows past the real ones zero) and their pages returned to the pool.
  std::vector<at::Tensor> take(const StashedRows& stashed);
  /// Before each iteration, outside any CUDA-graph capture: sizes the pools after the profiling iteration, then
  /// resets the free lists and the overflow mark in place (what a graph replay then reads).
  void begin_iteration();
  /// int64 scalar on the device: 1 when a put found no room since begin_iteration; undefined before the pools exist.
  at::Tensor overflowed() const { return overflowed_; }
  /// Whether the pools exist (the profiling iteration is over).
  bool sized() const { return sized_; }
  /// The pools' bytes on the device.
  int64_t pool_bytes() const;
  const PagedStashOptions& options() const { return options_; }

 private:
  /// One row width's pages: storage [pages x page_rows + page_rows scratch rows + 1 zero row, width / unit] of an
  /// integer type of `unit` bytes (the widest that divides every tensor's row: the copies move that many at once).
  struct Pool {
    at::Tensor storage;
    int64_t unit = 1;
    at::Tensor free_list;  ///< [pages + 1] int64: free page ids from head, circular; the last slot takes discards
    at::Tensor all_free;   ///< [pages + 1]: the free list as begin_iteration restores it
    at::Tensor ends;       ///< int64 [2]: pages taken, pages returned (both only grow until begin_iteration)
    int64_t pages = 0;
  };
  /// The profiling iteration's count for one width.
  struct Profile {
    at::Device device = at::kCPU;
    int64_t balanced_alive = 0, balanced_peak = 0;
    int64_t real_alive = 0, real_peak = 0;
    int64_t puts_alive = 0, puts_peak = 0;
    int64_t unit = 8;  ///< the widest of 8, 4, 2, 1 bytes dividing every tensor's row seen
  };

  /// Before the pools exist: the real rows kept as they are (all rows where `rows` may not be read), and counted.
  StashedRows keep_whole(const std::vector<at::Tensor>& tensors, const at::Tensor& rows, bool may_read_host,
                         StashedRows stashed);
  void size_pools();

  PagedStashOptions options_;
  bool sized_ = false;
  std::map<int64_t, Profile> profiles_;
  std::map<int64_t, Pool> pools_;
  at::Tensor overflowed_;
};

}  // namespace graphed::kernels
