// kernels/paged_attention_cuda.cpp — kernels/paged_attention_ops.h on a CUDA build; paged_attention_cpu.cpp is the
// CPU build's (one convention for the two builds: src/graphed/CMakeLists.txt). The split kernel of
// kernels/paged_attention.h where it applies, with the tile kernel of kernels/paged_prefill_attention.h for the
// tiles' tokens where that applies too, the reference (paged_attention_reference.cpp) elsewhere.
#include <c10/cuda/CUDAStream.h>

#include "graphed/kernels/paged_attention.h"
#include "graphed/kernels/paged_attention_ops.h"
#include "graphed/kernels/paged_prefill_attention.h"
#include "graphed/kernels/prefill_tiles.h"
#include "graphed/util/error.h"

namespace graphed::kernels {
namespace {

bool aligned(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

bool kernel_takes(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                  const PagedContext& context) {
  const auto type = query.scalar_type();
  const int64_t head_dim = query.size(2);
  const int64_t ratio = query.size(1) / key_cache.size(2);
  return query.is_cuda() && (type == at::kBFloat16 || type == at::kFloat) && key_cache.scalar_type() == type &&
         value_cache.scalar_type() == type && key_cache.is_contiguous() && value_cache.is_contiguous() &&
         head_dim % 8 == 0 && head_dim <= 256 && ratio <= 16 && aligned(key_cache) && aligned(value_cache) &&
         context.block_tables.is_contiguous() && context.token_request.is_contiguous() &&
         context.positions.is_contiguous();
}

/// Whether the tiles' tokens go through the tile kernel (where the split kernel takes the call): bf16, a head
/// dim the tile kernel has, the query 16-byte aligned. Checks the plan's fields, which only code sets.
bool tiles_take(const at::Tensor& q, const at::Tensor& key_cache, const PagedContext& context) {
  if (!context.tiles.defined()) return false;
  const at::Tensor& tiles = context.tiles;
  GRAPHED_INTERNAL_ASSERT(tiles.dim() == 2 && tiles.size(1) == kPrefillTileFields && tiles.scalar_type() == at::kLong &&
                              tiles.is_contiguous() && tiles.device() == q.device(),
                          "tiles must be [max tiles, 4] int64 on the query's device, got ", tiles.sizes());
  GRAPHED_INTERNAL_ASSERT(context.split_count.defined() && context.split_count.numel() == 1 &&
                              context.split_count.scalar_type() == at::kLong &&
                              context.split_count.device() == q.device(),
                          "tiles come with split_count, one int64 on the query's device");
  GRAPHED_INTERNAL_ASSERT(context.split_bound >= 0 && context.split_bound <= q.size(0), "split_bound ",
                          context.split_bound, " of a step of ", q.size(0), " tokens");
  return q.scalar_type() == at::kBFloat16 && aligned(q) &&
         paged_prefill_attention_fits(q.size(1), key_cache.size(2), q.size(2));
}

}  // namespace

at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                           const PagedContext& context, double scale) {
  if (!kernel_takes(query, key_cache, value_cache, context)) {
    return reference::paged_attention(query, key_cache, value_cache, context, scale);
  }
  const at::Tensor q = query.contiguous();
  const bool with_tiles = tiles_take(q, key_cache, context);
  PagedAttentionShape shape;
  shape.tokens = with_tiles ? context.split_bound : q.size(0);  // without the tile kernel: every token
  shape.heads = q.size(1);
  shape.head_dim = q.size(2);
  shape.groups = key_cache.size(2);
  shape.block_size = key_cache.size(1);
  shape.table_width = context.block_tables.size(1);
  shape.max_context = context.max_context;
  at::Tensor output = at::empty_like(q);
  at::Tensor workspace = at::empty({paged_attention_workspace(shape)}, q.options().dtype(at::kFloat));
  void* stream = static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream());
  const int64_t* block_tables = context.block_tables.data_ptr<int64_t>();
  const int64_t* token_request = context.token_request.data_ptr<int64_t>();
  const int64_t* positions = context.positions.data_ptr<int64_t>();
  launch_paged_attention(q.data_ptr(), key_cache.data_ptr(), value_cache.data_ptr(), block_tables, token_request,
                         positions, with_tiles ? context.split_count.data_ptr<int64_t>() : nullptr, output.data_ptr(),
                         workspace.data_ptr<float>(), shape, static_cast<float>(scale), q.scalar_type() == at::kFloat,
                         stream);
  if (!with_tiles) return output;
  PagedPrefillShape prefill;
  prefill.tokens = q.size(0);
  prefill.heads = shape.heads;
  prefill.groups = shape.groups;
  prefill.head_dim = shape.head_dim;
  prefill.block_size = shape.block_size;
  prefill.table_width = shape.table_width;
  prefill.tiles = context.tiles.size(0);
  launch_paged_prefill_attention(q.data_ptr(), key_cache.data_ptr(), value_cache.data_ptr(), block_tables,
                                 token_request, positions, context.tiles.data_ptr<int64_t>(), output.data_ptr(),
                                 prefill, static_cast<float>(scale), stream);
  return output;
}

}  // namespace graphed::kernels
