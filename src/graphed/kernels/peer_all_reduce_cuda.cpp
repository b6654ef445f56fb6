// kernels/peer_all_reduce_cuda.cpp — kernels/peer_all_reduce_ops.h on a CUDA build; peer_all_reduce_cpu.cpp is the
// CPU build's (one convention for the two builds: src/graphed/CMakeLists.txt). The areas live outside the caching
// allocator (cudaMalloc, so their handles stay valid) for the life of the object.
#include "graphed/kernels/peer_all_reduce_ops.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "graphed/kernels/peer_all_reduce.h"
#include "graphed/util/error.h"

namespace graphed::kernels {
namespace {

class DevicePeerAllReduce final : public PeerAllReduce {
 public:
  DevicePeerAllReduce(int64_t rank, int64_t ranks, int64_t capacity_bytes, const at::Device& device)
      : device_(device), handle_(kPeerHandleBytes) {
    const c10::cuda::CUDAGuard guard(device_);
    areas_.rank = static_cast<int>(rank);
    areas_.ranks = static_cast<int>(ranks);
    areas_.capacity = capacity_bytes;
    const int status =
        allocate_peer_area(peer_area_bytes(areas_.ranks, capacity_bytes), &areas_.areas[rank], handle_.data());
    if (status != 0) {
      throw DistributedError(::graphed::detail::concat(
          "could not allocate ", peer_area_bytes(areas_.ranks, capacity_bytes), " bytes for the peer all-reduce on ",
          device_.str(), ": ", peer_error_text(status), "; fix: leave more GPU memory free"));
    }
  }

  ~DevicePeerAllReduce() override {
    const c10::cuda::CUDAGuard guard(device_);
    cudaDeviceSynchronize();  // no sum of this rank still reads or writes the areas
    for (int r = 0; r < areas_.ranks; ++r) {
      if (r != areas_.rank && areas_.areas[r] != nullptr) close_peer_area(areas_.areas[r]);
    }
    free_peer_area(areas_.areas[areas_.rank]);
  }

  std::vector<uint8_t> handle() const override { return handle_; }

  std::string connect(const std::vector<std::vector<uint8_t>>& handles) override {
    GRAPHED_INTERNAL_ASSERT(static_cast<int>(handles.size()) == areas_.ranks, "one handle per rank");
    const c10::cuda::CUDAGuard guard(device_);
    for (int r = 0; r < areas_.ranks; ++r) {
      if (r == areas_.rank) continue;
      const int status = open_peer_area(handles[r].data(), &areas_.areas[r]);
      if (status != 0)
        return ::graphed::detail::concat("rank ", r, "'s memory cannot be mapped: ", peer_error_text(status));
    }
    return {};
  }

  bool fits(const at::Tensor& tensor) const override {  // by shape and dtype only: alike on every rank
    if (!tensor.is_cuda()) return false;
    if (tensor.scalar_type() != at::kBFloat16 && tensor.scalar_type() != at::kFloat) return false;
    const int64_t bytes = tensor.numel() * static_cast<int64_t>(tensor.element_size());
    return bytes > 0 && bytes % 16 == 0 && bytes <= areas_.capacity;
  }

  at::Tensor sum(const at::Tensor& given) override {
    GRAPHED_INTERNAL_ASSERT(fits(given), "the peer all-reduce takes this tensor");
    const bool aligned = given.is_contiguous() && reinterpret_cast<uintptr_t>(given.data_ptr()) % 16 == 0;
    const at::Tensor tensor = aligned ? given : given.clone(at::MemoryFormat::Contiguous);  // a fresh, aligned block
    at::Tensor output = at::empty_like(tensor);
    const PeerElement element = tensor.scalar_type() == at::kBFloat16 ? PeerElement::kBFloat16 : PeerElement::kFloat32;
    const int status = launch_peer_all_reduce(areas_, tensor.data_ptr(), output.data_ptr(), tensor.numel(), element,
                                              c10::cuda::getCurrentCUDAStream().stream());
    GRAPHED_INTERNAL_ASSERT(status == 0, "the peer all-reduce takes the tensor: ", peer_error_text(status));
    return output;
  }

 private:
  at::Device device_;
  PeerAreas areas_;
  std::vector<uint8_t> handle_;
};

}  // namespace

bool peer_all_reduce_built() { return true; }

std::unique_ptr<PeerAllReduce> make_peer_all_reduce(int64_t rank, int64_t ranks, int64_t capacity_bytes,
                                                    const at::Device& device) {
  if (!device.is_cuda() || (ranks != 2 && ranks != 4 && ranks != 8)) return nullptr;
  return std::make_unique<DevicePeerAllReduce>(rank, ranks, capacity_bytes, device);
}

}  // namespace graphed::kernels
