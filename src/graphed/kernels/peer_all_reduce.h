// kernels/peer_all_reduce.h — a one-shot all-reduce over the GPUs of one host for the small tensors of a
// decode step, free of ATen: each rank writes its tensor into every peer's receive area through peer memory
// (NVLink), raises a flag there, waits for every peer's flag, and sums what it received in rank order. One
// launch and no host work, so it runs inside CUDA graphs. The ATen face is kernels/peer_all_reduce_ops.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace graphed::kernels {

constexpr int kPeerMaxRanks = 8;
constexpr int kPeerMaxBlocks = 32;       ///< blocks of one launch (each waits only for its peers' same block)
constexpr size_t kPeerHandleBytes = 64;  ///< a cudaIpcMemHandle_t

/// Each rank's area (one allocation, shared with its peers): flags [kPeerMaxBlocks][kPeerMaxRanks] (uint32,
/// raised by the peers), this rank's own launch counters [kPeerMaxBlocks], then two receive slots of
/// [ranks][capacity] bytes (calls alternate between them, so a peer one call ahead never overwrites what this
/// rank still reads).
size_t peer_area_bytes(int ranks, int64_t capacity);

/// Where a launch finds every rank's area, as this process maps them.
struct PeerAreas {
  void* areas[kPeerMaxRanks] = {};  ///< rank r's area; areas[rank] is this rank's own
  int rank = 0;
  int ranks = 0;
  int64_t capacity = 0;  ///< bytes one rank sends in one call, at most
};

enum class PeerElement { kBFloat16, kFloat32 };

/// output [elements] = the sum over the ranks of each rank's input, in rank order in fp32 and rounded once, so
/// every rank gets the same bits. bytes a multiple of 16 and at most capacity; pointers 16-byte aligned; every
/// rank calls with the same size in the same order. Returns cudaErrorInvalidValue (a cudaError_t) for a size or
/// a number of ranks it does not take, else 0; a launch that fails throws graphed::Error (detail/launch_check.h).
int launch_peer_all_reduce(const PeerAreas& areas, const void* input, void* output, int64_t elements,
                           PeerElement element, void* stream);

/// Allocates and zeroes an area of `bytes` on the current device; writes its handle (kPeerHandleBytes) for
/// the peers. Returns a cudaError_t.
int allocate_peer_area(size_t bytes, void** area, void* handle);
/// Maps a peer's area from its handle. Returns a cudaError_t (peer access may be unavailable).
int open_peer_area(const void* handle, void** area);
void close_peer_area(void* area);
void free_peer_area(void* area);
/// The CUDA runtime's text for a code the functions above returned.
const char* peer_error_text(int code);

}  // namespace graphed::kernels
