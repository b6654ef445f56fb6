// kernels/decode_ops_cuda.cpp — kernels/decode_ops.h on a CUDA build.
#include "graphed/kernels/decode_ops.h"

#include <c10/cuda/CUDAStream.h>

#include "graphed/kernels/decode_kernels.h"
#include "graphed/util/error.h"

namespace graphed::kernels {
namespace {

void* current_stream() { return static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream()); }

void require(const at::Tensor& tensor, const char* name) {
  GRAPHED_INTERNAL_ASSERT(tensor.is_cuda() && tensor.scalar_type() == at::kBFloat16 && tensor.is_contiguous(),
                          name, " must be a contiguous CUDA bf16 tensor");
}

}  // namespace

bool decode_kernels_supported(const at::Tensor& like) { return like.is_cuda() && like.scalar_type() == at::kBFloat16; }

at::Tensor rms_norm(const at::Tensor& input, const at::Tensor& weight, double epsilon) {
  const at::Tensor x = input.contiguous();
  require(x, "rms_norm input");
  require(weight, "rms_norm weight");
  at::Tensor output = at::empty_like(x);
  const int64_t columns = x.size(-1);
  launch_rms_norm(x.data_ptr(), weight.data_ptr(), output.data_ptr(), x.numel() / columns, columns,
                  static_cast<float>(epsilon), current_stream());
  return output;
}

at::Tensor rope_into_cache(const at::Tensor& qkv, const at::Tensor& positions, const at::Tensor& cos,
                           const at::Tensor& sin, const at::Tensor& key_cache, const at::Tensor& value_cache,
                           int64_t heads, int64_t groups, int64_t head_dim) {
  const at::Tensor x = qkv.contiguous();
  require(x, "qkv");
  require(key_cache, "key cache");
  require(value_cache, "value cache");
  GRAPHED_INTERNAL_ASSERT(positions.scalar_type() == at::kLong && positions.is_contiguous(), "positions must be int64");
  const int64_t rows = key_cache.size(0);
  GRAPHED_INTERNAL_ASSERT(x.numel() == rows * (heads + 2 * groups) * head_dim && positions.numel() == rows,
                          "one token per row");
  if (cos.defined()) {
    require(cos, "rotary cos");
    require(sin, "rotary sin");
  }
  at::Tensor query = at::empty({rows, heads, head_dim}, x.options());
  launch_rope_into_cache(x.data_ptr(), positions.data_ptr<int64_t>(), cos.defined() ? cos.data_ptr() : nullptr,
                         sin.defined() ? sin.data_ptr() : nullptr, query.data_ptr(), key_cache.data_ptr(),
                         value_cache.data_ptr(), rows, heads, groups, head_dim, key_cache.size(2), current_stream());
  return query;
}

at::Tensor decode_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                            const at::Tensor& positions, double scale) {
  require(query, "query");
  require(key_cache, "key cache");
  require(value_cache, "value cache");
  const int64_t rows = query.size(0);
  const int64_t heads = query.size(1);
  const int64_t head_dim = query.size(2);
  GRAPHED_INTERNAL_ASSERT(decode_attention_fits(key_cache.size(2), head_dim), "cache too long for decode_attention");
  at::Tensor output = at::empty_like(query);
  launch_decode_attention(query.data_ptr(), key_cache.data_ptr(), value_cache.data_ptr(), positions.data_ptr<int64_t>(),
                          output.data_ptr(), rows, heads, key_cache.size(1), head_dim, key_cache.size(2),
                          static_cast<float>(scale), current_stream());
  return output;
}

bool decode_attention_fits(int64_t cache_length, int64_t head_dim) {
  return cache_length <= max_decode_attention_length() && head_dim <= 256 && head_dim % 8 == 0;
}

at::Tensor decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t in_features = weight.size(1);
  const int64_t rows = input.numel() / in_features;
  const auto aligned = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  const bool fits = decode_kernels_supported(input) && weight.scalar_type() == at::kBFloat16 && weight.is_contiguous() &&
                    input.is_contiguous() && rows == 1 && in_features % 8 == 0 &&
                    aligned(input) && aligned(weight) &&
                    (!bias.defined() || (bias.scalar_type() == at::kBFloat16 && bias.is_contiguous()));
  if (!fits) return at::linear(input, weight, bias);
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes.back() = weight.size(0);
  at::Tensor output = at::empty(sizes, input.options());
  launch_vector_linear(input.data_ptr(), weight.data_ptr(), bias.defined() ? bias.data_ptr() : nullptr,
                       output.data_ptr(), in_features, weight.size(0), current_stream());
  return output;
}

at::Tensor silu_and_mul(const at::Tensor& input) {
  const at::Tensor x = input.contiguous();
  require(x, "silu_and_mul input");
  const int64_t width = x.size(-1) / 2;
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = width;
  at::Tensor output = at::empty(sizes, x.options());
  launch_silu_and_mul(x.data_ptr(), output.data_ptr(), x.numel() / x.size(-1), width, current_stream());
  return output;
}

}  // namespace graphed::kernels
