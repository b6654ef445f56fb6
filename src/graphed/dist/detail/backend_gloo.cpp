// dist/detail/backend_gloo.cpp — the Gloo process group for CPU ranks. Built with Gloo where its
// headers were found (GRAPHED_GLOO: Debian's libgloo-dev beside libtorch-dev); the pip wheel ships
// none, so a CUDA build trains several ranks on GPUs only.
#include "graphed/dist/detail/backend.h"

#include <cstdlib>

#include "graphed/util/error.h"

#if GRAPHED_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

namespace graphed::dist::detail {

#if GRAPHED_GLOO

bool gloo_available() { return true; }

namespace {

/// The network device Gloo listens on: GLOO_SOCKET_IFNAME when set, the loopback address for a
/// rendezvous on this machine, else the address the host name resolves to.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_address) {
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  }
  if (master_address == "127.0.0.1" || master_address == "localhost") {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

std::shared_ptr<BackendHandle> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int64_t rank,
                                                 int64_t size, std::chrono::milliseconds timeout,
                                                 const std::string& master_address) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(gloo_device(master_address));
  auto handle = std::make_shared<BackendHandle>();
  handle->backend =
      c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(rank), static_cast<int>(size), options);
  return handle;
}

#else

bool gloo_available() { return false; }

std::shared_ptr<BackendHandle> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>&, int64_t, int64_t,
                                                 std::chrono::milliseconds, const std::string&) {
  throw DistributedError(
      "this graphed binary was built without Gloo (no gloo headers were found at build time), "
      "so its ranks cannot talk on CPUs; fix: train the ranks on GPUs (NCCL), or install "
      "libgloo-dev (scripts/setup) and rebuild");
}

#endif

}  // namespace graphed::dist::detail
