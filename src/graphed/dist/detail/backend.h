// dist/detail/backend.h — the c10d type a Communicator drives, the same spelling on both LibTorch
// flavours: in 1.13 a backend is a c10d::ProcessGroup, in 2.x a c10d::Backend. And the factories
// for NCCL (CUDA builds) and Gloo (builds that have the gloo headers).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

#include <ATen/ATen.h>

namespace graphed::dist::detail {

#if TORCH_VERSION_MAJOR >= 2
using Backend = c10d::Backend;
#else
using Backend = c10d::ProcessGroup;
#endif

struct BackendHandle {
  c10::intrusive_ptr<Backend> backend;
};

/// Whether this build can make the backend (NCCL needs a CUDA LibTorch; Gloo needs the gloo headers).
bool nccl_available();
bool gloo_available();
/// One process group of `size` members over `store` (already prefixed for the group). Throws
/// DistributedError when the backend is not in this build.
std::shared_ptr<BackendHandle> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int64_t rank,
                                                 int64_t size, std::chrono::milliseconds timeout,
                                                 const at::Device& device);
std::shared_ptr<BackendHandle> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int64_t rank,
                                                 int64_t size, std::chrono::milliseconds timeout,
                                                 const std::string& master_address);

}  // namespace graphed::dist::detail
