// kernels/moe_expert_rows.h — the rows around an MoE's grouped GEMMs, free of ATen: the gather of tokens into expert
// order and the weighted sum back (with their gradients), and each expert's bias with the activation (with the
// bias's gradient as each expert's column sums). One launch each way where LibTorch takes several; sums in fp32 in a
// fixed order, nothing added by atomics, so a launch gives the same bits on every run, eager or in a CUDA graph.
// kernels/moe_routing_ops.h is the face; a launch that fails throws graphed::Error.
#pragma once

#include <cstdint>

#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels {

/// The shape of a permutation between T tokens and their A = T k assignments sorted by expert.
struct PermuteShape {
  int64_t tokens = 0;
  int64_t top_k = 0;
  int64_t columns = 0;
};

/// sorted[r] = tokens[order[r] / k] (sorted [A, columns] of `sorted_type`, tokens [T, columns] of `token_type`).
void launch_permute(const void* tokens, Element token_type, const int64_t* order, void* sorted, Element sorted_type,
                    const PermuteShape& shape, void* stream);
/// grad_tokens[t] = the sum over j < k of grad_sorted[destination[t k + j]], in j order, in fp32.
void launch_permute_backward(const void* grad_sorted, Element sorted_type, const int64_t* destination,
                             void* grad_tokens, Element token_type, const PermuteShape& shape, void* stream);

/// out[t] = the sum over j < k of weights[t k + j] x expert_output[destination[t k + j]] (in j order, in fp32;
/// out [T, columns] and expert_output [A, columns] of `type`, weights fp32 [T, k]).
void launch_unpermute(const void* expert_output, Element type, const float* weights, const int64_t* destination,
                      void* out, const PermuteShape& shape, void* stream);
/// For each sorted row r of assignment a = order[r] (token t = a / k): grad_expert_output[r] = grad_out[t] x
/// weights[a] and grad_weights[a] = grad_out[t] . expert_output[r] (a fixed-order block sum).
void launch_unpermute_backward(const void* grad_out, const void* expert_output, Element type, const float* weights,
                               const int64_t* order, void* grad_expert_output, float* grad_weights,
                               const PermuteShape& shape, void* stream);

/// What follows an expert's bias: nothing (fc2's bias), GELU (erf or tanh form), or SwiGLU (silu of the first
/// half of the columns times the second half).
enum class ExpertActivation { kNone, kGelu, kGeluTanh, kSwiglu };

/// The rows of a grouped product and their experts: rows sorted by expert, offsets [E + 1] int64 on the device with
/// offsets[0] = 0 and offsets[E] = rows (the backward walks each expert's rows, so rows past offsets[E] would get no
/// gradient).
struct BiasActivationShape {
  int64_t rows = 0;
  int64_t columns = 0;  ///< of the input (SwiGLU's output has half)
  int64_t experts = 0;
  ExpertActivation activation = ExpertActivation::kNone;
};

/// out[r] = activation(hidden[r] + bias[expert of r]) computed in fp32 and rounded once to `out_type` (bias fp32
/// [E, columns], or null for none).
void launch_bias_activation(const void* hidden, Element hidden_type, const float* bias, const int64_t* offsets,
                            void* out, Element out_type, const BiasActivationShape& shape, void* stream);
/// grad_hidden [rows, columns] (of hidden's type) through the activation, recomputed from hidden and bias; and,
/// where grad_bias is not null, grad_bias [E, columns] (fp32): each expert's column sums of that gradient before
/// rounding, in a fixed order.
void launch_bias_activation_backward(const void* grad_out, Element out_type, const void* hidden, Element hidden_type,
                                     const float* bias, const int64_t* offsets, void* grad_hidden, float* grad_bias,
                                     const BiasActivationShape& shape, void* stream);

}  // namespace graphed::kernels
