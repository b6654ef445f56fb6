// bench/paged_attention_timing.cu — times kernels/paged_attention.cu's decode launch alone (no LibTorch): a batch of
// decode tokens, one per request, over random contexts in a paged bf16 cache with shuffled blocks, the llama-1b
// attention shape by default; prints microseconds per launch, the cache bytes it must read, and GB/s. Built by hand
// on a GPU machine (scripts/time-paged-attention), for comparing kernel variants:
//   nvcc -O3 -std=c++17 -arch=sm_90a -I src bench/paged_attention_timing.cu -o paged_attention_timing
//   ./paged_attention_timing BATCH LOW HIGH [MAX_CONTEXT [HEADS GROUPS HEAD_DIM]]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "graphed/kernels/device_facts.cu"
#include "graphed/kernels/paged_attention.cu"

namespace {

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
  std::exit(1);
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  T* device = nullptr;
  check(cudaMalloc(&device, host.size() * sizeof(T)), "cudaMalloc");
  check(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return device;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s BATCH LOW HIGH [MAX_CONTEXT [HEADS GROUPS HEAD_DIM]]\n", argv[0]);
    return 2;
  }
  const int64_t batch = std::atoll(argv[1]), low = std::atoll(argv[2]), high = std::atoll(argv[3]);
  const int64_t max_context = argc > 4 ? std::atoll(argv[4]) : 4096;
  const int64_t heads = argc > 7 ? std::atoll(argv[5]) : 32, groups = argc > 7 ? std::atoll(argv[6]) : 8,
                head_dim = argc > 7 ? std::atoll(argv[7]) : 64;
  const int64_t block_size = 256, width = (max_context + block_size - 1) / block_size;
  const int64_t used = (high + block_size - 1) / block_size;  // blocks a request holds at most
  const int64_t blocks = batch * used + 1;
  std::mt19937_64 random(5);
  std::vector<int64_t> order(static_cast<size_t>(blocks - 1));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i) + 1;
  std::shuffle(order.begin(), order.end(), random);
  std::vector<int64_t> tables(static_cast<size_t>(batch * width), 0), positions, token_request;
  for (int64_t r = 0; r < batch; ++r) {
    std::copy(order.begin() + r * used, order.begin() + (r + 1) * used, tables.begin() + r * width);
  }
  std::uniform_int_distribution<int64_t> context(low, high);
  double cache_bytes = 0;
  for (int64_t t = 0; t < batch; ++t) {
    const int64_t length = context(random);
    positions.push_back(length - 1);
    token_request.push_back(t);
    cache_bytes += 2.0 * static_cast<double>(length * groups * head_dim) * 2.0;
  }
  const size_t cache_elements = static_cast<size_t>(blocks * block_size * groups * head_dim);
  std::vector<__nv_bfloat16> values(cache_elements);
  uint64_t state = 88172645463325252ull;  // xorshift: values in [-2, 2), quickly for a gigabyte
  const auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return static_cast<float>(state >> 40) / static_cast<float>(1 << 24) * 4.0f - 2.0f;
  };
  for (auto& value : values) value = __float2bfloat16(next());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<__nv_bfloat16> query(static_cast<size_t>(batch * heads * head_dim));
  for (auto& value : query) value = __float2bfloat16(normal(random));
  __nv_bfloat16 *key_cache = device_copy(values), *value_cache = device_copy(values), *q = device_copy(query);
  std::reverse(values.begin(), values.end());
  check(cudaMemcpy(value_cache, values.data(), cache_elements * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  int64_t *tables_device = device_copy(tables), *positions_device = device_copy(positions),
          *request_device = device_copy(token_request);
  graphed::kernels::PagedAttentionShape shape{batch, heads, groups, head_dim, block_size, width, max_context};
  std::vector<float> workspace_host(static_cast<size_t>(graphed::kernels::paged_attention_workspace(shape)));
  float* workspace = device_copy(workspace_host);
  __nv_bfloat16* output = device_copy(query);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const auto launch = [&] {
    graphed::kernels::launch_paged_attention(q, key_cache, value_cache, tables_device, request_device,
                                             positions_device, nullptr, output, workspace, shape, scale, false,
                                             nullptr);
  };
  for (int i = 0; i < 5; ++i) launch();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  constexpr int kLaunches = 50;
  cudaEventRecord(start);
  for (int i = 0; i < kLaunches; ++i) launch();
  cudaEventRecord(stop);
  check(cudaEventSynchronize(stop), "the launches");
  float milliseconds = 0;
  cudaEventElapsedTime(&milliseconds, start, stop);
  const double microseconds = 1000.0 * milliseconds / kLaunches;
  check(cudaMemcpy(query.data(), output, query.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
  double checksum = 0;
  for (const auto& value : query) checksum += std::abs(static_cast<double>(__bfloat162float(value)));
  std::printf("batch %lld, contexts %lld..%lld, limit %lld, %lld/%lld heads, dim %lld: %.1f us, %.1f MB, %.0f GB/s, "
              "checksum %.6f\n",
              static_cast<long long>(batch), static_cast<long long>(low), static_cast<long long>(high),
              static_cast<long long>(max_context), static_cast<long long>(heads), static_cast<long long>(groups),
              static_cast<long long>(head_dim), microseconds, cache_bytes / 1e6, cache_bytes / microseconds / 1e3,
              checksum / static_cast<double>(query.size()));
  return 0;
}
