// kernels/peer_all_reduce_cpu.cpp — kernels/peer_all_reduce_ops.h on a CPU build, in place of
// peer_all_reduce_cuda.cpp (one convention for the two builds: src/graphed/CMakeLists.txt): there is no peer
// memory, so every group keeps its library's all-reduce.
#include "graphed/kernels/peer_all_reduce_ops.h"

namespace graphed::kernels {

bool peer_all_reduce_built() { return false; }

std::unique_ptr<PeerAllReduce> make_peer_all_reduce(int64_t, int64_t, int64_t, const at::Device&) { return nullptr; }

}  // namespace graphed::kernels
