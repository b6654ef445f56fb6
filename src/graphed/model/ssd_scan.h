// model/ssd_scan.h — Mamba-2's selective state-space scan: the recurrence by its definition (one step per
// position) and its chunked form (SSD: attention-like products inside chunks, the state passed between
// chunks), both in LibTorch ops, so autograd gives the backward and a CUDA graph can hold them (static
// shapes, no host reads). The Mamba-2 mixer (issue 14) is built on the chunked form; the sequential one is
// its test reference.
#pragma once

#include <ATen/ATen.h>

namespace graphed::model {

/// The scan's inputs. h heads of p channels each, g groups of B and C (h a multiple of g; head k reads
/// group k / (h / g)), state size n.
struct ScanInputs {
  at::Tensor x;              ///< [batch, length, h, p]
  at::Tensor dt;             ///< [batch, length, h], positive (after softplus and the bias)
  at::Tensor a;              ///< [h], negative (-exp(A_log))
  at::Tensor b;              ///< [batch, length, g, n]
  at::Tensor c;              ///< [batch, length, g, n]
  at::Tensor initial_state;  ///< [batch, h, p, n], the state before position 0; undefined = zeros
};

/// What a scan returns: the outputs and the state after the last position.
struct ScanOutput {
  at::Tensor y;            ///< [batch, length, h, p]
  at::Tensor final_state;  ///< [batch, h, p, n]
};

/// The definition: state_t = exp(dt_t a) state_{t-1} + dt_t x_t b_tᵀ, y_t = state_t c_t, from the initial
/// state. One step per position: the reference, and what a decode step does.
ScanOutput sequential_scan(const ScanInputs& inputs);

/// The same outputs in chunks of chunk_size positions (a length that is not a multiple is padded with
/// dt = 0, which neither decays the state nor adds to it).
ScanOutput chunked_scan(const ScanInputs& inputs, int64_t chunk_size);

}  // namespace graphed::model
