// dist/detail/backend_nccl.cpp — the NCCL process group (CUDA builds; LibTorch 2.x exports
// ProcessGroupNCCL). Elsewhere the factory says NCCL is missing from this build.
#include "graphed/dist/detail/backend.h"

#include <cstdlib>

#include "graphed/util/error.h"

#if GRAPHED_CUDA && defined(USE_C10D_NCCL) && !defined(GRAPHED_NO_NCCL_HEADER)
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace graphed::dist::detail {

#if GRAPHED_CUDA && defined(USE_C10D_NCCL) && !defined(GRAPHED_NO_NCCL_HEADER)

bool nccl_available() { return true; }

std::shared_ptr<BackendHandle> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int64_t rank,
                                                 int64_t size, std::chrono::milliseconds timeout,
                                                 const at::Device& device) {
  // NCCL's own registration of captured buffers hangs or faults with PyTorch's allocator (research
  // libtorch-graphs.md §4.3, Megatron P-16); keep it off unless the user chose otherwise.
  ::setenv("NCCL_GRAPH_REGISTER", "0", /*overwrite=*/0);
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device.index()));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto handle = std::make_shared<BackendHandle>();
  handle->backend =
      c10::make_intrusive<c10d::ProcessGroupNCCL>(store, static_cast<int>(rank), static_cast<int>(size), options);
  handle->backend->setBoundDeviceId(device);
  return handle;
}

#else

bool nccl_available() { return false; }

std::shared_ptr<BackendHandle> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>&, int64_t, int64_t,
                                                 std::chrono::milliseconds, const at::Device&) {
  throw DistributedError(
      "this graphed binary was built without NCCL (a CPU-only LibTorch), so its ranks cannot "
      "talk on GPUs; fix: build against a CUDA PyTorch's LibTorch (scripts/build on the GPU "
      "machine), or train on CPUs with --device cpu (Gloo)");
}

#endif

}  // namespace graphed::dist::detail
