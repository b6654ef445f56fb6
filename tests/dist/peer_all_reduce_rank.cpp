// tests/dist/peer_all_reduce_rank.cpp — one rank of tests/dist/peer_collectives_cuda_test.cpp: joins a
// two-rank NCCL group through a file store, takes the inference collectives (dist/peer_collectives.h) and
// checks their sums against the exact sum of both ranks' inputs, which each rank draws itself from the
// same seeds: eager calls of every size around the peer kernel's limits, a CUDA graph replayed with new
// inputs between eager calls, and a long run of calls that no host sync separates. Exit 0 when all hold;
// otherwise the first failure on stderr and exit 1.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include "graphed/dist/detail/backend.h"
#include "graphed/dist/peer_collectives.h"

namespace graphed::dist {
namespace {

constexpr int64_t kRanks = 2;

/// Rank r's input for call `call`: seeded, the same on every rank that asks.
at::Tensor input_of(int64_t rank, int64_t call, int64_t elements, at::ScalarType type) {
  at::Generator generator = at::detail::createCPUGenerator(static_cast<uint64_t>(1000 * call + rank + 1));
  return at::randn({elements}, generator, at::TensorOptions().dtype(at::kFloat)).to(type);
}

/// The sum in rank order in fp32, rounded once: what the peer kernel computes.
at::Tensor expected_sum(int64_t call, int64_t elements, at::ScalarType type) {
  at::Tensor sum = at::zeros({elements}, at::kFloat);
  for (int64_t r = 0; r < kRanks; ++r) sum = sum + input_of(r, call, elements, type).to(at::kFloat);
  return sum.to(type);
}

void require_equal(const at::Tensor& got, const at::Tensor& expected, const std::string& what) {
  if (!at::equal(got.cpu(), expected)) {
    throw std::runtime_error(
        what + ": not bitwise equal; largest difference " +
        std::to_string((got.cpu().to(at::kFloat) - expected.to(at::kFloat)).abs().max().item<float>()));
  }
}

void check_sizes(model::TensorCollectives& collectives, int64_t rank, const at::Device& device) {
  int64_t call = 0;
  // 16 bytes; a decode step's rows; not a multiple of 16 bytes (the group's); the capacity; past it (the group's).
  for (const at::ScalarType type : {at::kBFloat16, at::kFloat}) {
    const int64_t per_element = type == at::kBFloat16 ? 2 : 4;
    const int64_t capacity = kPeerAllReduceCapacity / per_element;
    for (const int64_t elements :
         {int64_t{16} / per_element, int64_t{2048}, int64_t{8 * 2048}, int64_t{1001}, capacity, capacity + 2048}) {
      ++call;
      const at::Tensor got = collectives.all_reduce_sum(input_of(rank, call, elements, type).to(device));
      require_equal(got, expected_sum(call, elements, type),
                    std::string(at::toString(type)) + " sum of " + std::to_string(elements) + " elements");
    }
  }
}

/// A graph of two sums (the second of the first's result) replayed with new inputs, an eager sum between replays.
void check_graph(model::TensorCollectives& collectives, int64_t rank, const at::Device& device) {
  const int64_t elements = 4096;
  at::Tensor input = input_of(rank, 100, elements, at::kBFloat16).to(device);
  collectives.all_reduce_sum(input);  // warm-up
  at::cuda::CUDAGraph graph;
  graph.capture_begin();
  const at::Tensor first = collectives.all_reduce_sum(input);
  const at::Tensor second = collectives.all_reduce_sum(first);
  graph.capture_end();
  for (int64_t replay = 0; replay < 50; ++replay) {
    const int64_t call = 200 + replay;
    input.copy_(input_of(rank, call, elements, at::kBFloat16));
    graph.replay();
    const at::Tensor between = collectives.all_reduce_sum(input_of(rank, call, 2048, at::kBFloat16).to(device));
    const at::Tensor sum = expected_sum(call, elements, at::kBFloat16);
    require_equal(first, sum, "replay " + std::to_string(replay) + "'s first sum");
    require_equal(second, (sum.to(at::kFloat) * 2).to(at::kBFloat16),
                  "replay " + std::to_string(replay) + "'s second sum");
    require_equal(between, expected_sum(call, 2048, at::kBFloat16),
                  "the eager sum after replay " + std::to_string(replay));
  }
}

/// 2,000 sums in a row, each of the last one's result: rank r adds its own input once and every later step doubles.
void check_back_to_back(model::TensorCollectives& collectives, int64_t rank, const at::Device& device) {
  at::Tensor value =
      at::full({8192}, static_cast<float>(rank + 1) / 1024.0f, at::TensorOptions().dtype(at::kFloat).device(device));
  for (int call = 0; call < 2000; ++call) value = collectives.all_reduce_sum(value) * 0.5;
  // (1 + 2) / 1024 x 0.5 after the first call, then (x + x) x 0.5 = x: exact in fp32.
  require_equal(value, at::full({8192}, 1.5f / 1024.0f, at::kFloat), "2,000 sums in a row");
}

/// Microseconds per sum of `elements` bf16 values in a graph of 34 chained sums (a llama-1b decode step's count),
/// replayed 50 times: printed for the record, never asserted.
double microseconds_per_sum(model::TensorCollectives& collectives, const at::Device& device, int64_t elements) {
  constexpr int kSums = 34, kReplays = 50;
  const at::Tensor input = at::full({elements}, 1.0f / 1024, at::TensorOptions().dtype(at::kBFloat16).device(device));
  at::Tensor value = collectives.all_reduce_sum(input);  // warm-up
  at::cuda::CUDAGraph graph;
  graph.capture_begin();
  value = input;
  for (int i = 0; i < kSums; ++i) value = collectives.all_reduce_sum(value);
  graph.capture_end();
  graph.replay();
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  start.record();
  for (int i = 0; i < kReplays; ++i) graph.replay();
  stop.record();
  stop.synchronize();
  return start.elapsed_time(stop) * 1000.0 / (kSums * kReplays);
}

int run(int64_t rank, const std::string& store_path) {
  const at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(rank));
  const c10::cuda::CUDAGuard device_guard(device);
  const c10::cuda::CUDAStreamGuard stream_guard(c10::cuda::getStreamFromPool(false, device.index()));
  const auto store = c10::make_intrusive<c10d::FileStore>(store_path, kRanks);
  Communicator group(detail::make_nccl_backend(store, rank, kRanks, std::chrono::seconds(60), device),
                     "tensor-parallel", {0, 1}, rank);
  const std::shared_ptr<model::TensorCollectives> collectives = make_inference_collectives(group, device, true);
  if (std::dynamic_pointer_cast<PeerTensorCollectives>(collectives) == nullptr) {
    throw std::runtime_error("the GPUs could not map each other's memory: the peer all-reduce is off");
  }
  check_sizes(*collectives, rank, device);
  check_graph(*collectives, rank, device);
  check_back_to_back(*collectives, rank, device);
  GroupTensorCollectives library(group);
  for (const int64_t elements : {int64_t{2048}, int64_t{8 * 2048}}) {
    const double peer = microseconds_per_sum(*collectives, device, elements);
    const double nccl = microseconds_per_sum(library, device, elements);
    if (rank == 0) {
      std::cout << "sum of " << elements * 2 / 1024 << " KiB in a graph of 34: peer memory " << peer << " us, NCCL "
                << nccl << " us\n";
    }
  }
  group.barrier();
  group.shutdown();
  std::cout << "rank " << rank << ": every check held\n";
  return 0;
}

}  // namespace
}  // namespace graphed::dist

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: peer_all_reduce_rank RANK STORE_FILE\n";
    return 2;
  }
  try {
    return graphed::dist::run(std::atoll(argv[1]), argv[2]);
  } catch (const std::exception& error) {
    std::cerr << "rank " << argv[1] << ": " << error.what() << "\n";
    return 1;
  }
}
