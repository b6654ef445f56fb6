// kernels/moe_routing.h — the MoE's work around its grouped GEMMs, free of ATen, a launch or two each where LibTorch
// takes several: the router's softmax, top-k and load-balancing sums; the counting sort of the assignments by
// expert; the gather of tokens into that order and the weighted sum back; each expert's bias with the activation.
// Every reduction runs in a fixed order in fp32 and nothing adds with atomics (integer counts in shared memory
// aside), so a launch gives the same bits on every run, eager or inside a CUDA graph. kernels/moe_routing_ops.h is
// the face; a launch that fails throws graphed::Error.
#pragma once

#include <cstdint>

#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels {

/// The most experts and choices a token the route kernels take (a warp holds a token's logits in registers).
constexpr int64_t kRouteMaxExperts = 256;
constexpr int64_t kRouteMaxTopK = 32;
/// The most assignments and experts the one-block counting sort takes.
constexpr int64_t kSortPlanMaxAssignments = 16384;
constexpr int64_t kSortPlanMaxExperts = 256;

struct RouteShape {
  int64_t tokens = 0;
  int64_t experts = 0;
  int64_t top_k = 0;
  bool pre_softmax = false;  ///< choose by the softmax over every expert and keep those probabilities
  Element logits = Element::kFloat32;
};

/// For each token t (a warp each): probabilities[t] = softmax(logits[t]) over the experts (fp32 [T, E]); the k
/// experts of the largest logits (pre_softmax: probabilities), ties to the lower expert, into indices [T, k]
/// (largest first); their weights [T, k]: a softmax over the k chosen logits (pre_softmax: their probabilities).
void launch_route_forward(const void* logits, float* probabilities, float* weights, int64_t* indices,
                          const RouteShape& shape, void* stream);

/// mass[e] = the sum over tokens of probabilities[t][e]; counts[e] = how many of indices' T k entries are e (both
/// fp32 [E]; a block an expert, tokens summed in a fixed order).
void launch_route_sums(const float* probabilities, const int64_t* indices, float* mass, float* counts,
                       const RouteShape& shape, void* stream);

/// grad_logits [T, E] (of the logits' type) from the gradients of weights (grad_weights [T, k], or null) and of
/// mass (grad_mass [E], or null), through both softmaxes; probabilities, weights and indices as the forward wrote them.
void launch_route_backward(const float* probabilities, const float* weights, const int64_t* indices,
                           const float* grad_weights, const float* grad_mass, void* grad_logits,
                           const RouteShape& shape, void* stream);

/// loss[0] = scale x the sum over experts of mass[e] x counts[e] (Switch load balancing; one block, a fixed order).
void launch_switch_loss(const float* mass, const float* counts, float scale, float* loss, int64_t experts,
                        void* stream);
/// grad_mass[e] = scale x counts[e] x grad_loss[0] (grad_loss read on the device).
void launch_switch_loss_backward(const float* counts, const float* grad_loss, float scale, float* grad_mass,
                                 int64_t experts, void* stream);

/// A stable counting sort of `experts_of` [A] (each in [0, experts)): order [A] (the assignment at each sorted
/// row), destination [A] (each assignment's sorted row), counts [E] and offsets [E + 1] (offsets[e] .. offsets[e +
/// 1] are expert e's rows), all int64. One block; A <= kSortPlanMaxAssignments, experts <= kSortPlanMaxExperts.
void launch_sort_plan(const int64_t* experts_of, int64_t assignments, int64_t experts, int64_t* order,
                      int64_t* destination, int64_t* counts, int64_t* offsets, void* stream);

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

/// The rows of a grouped product and their experts: rows sorted by expert, offsets [E + 1] int64 on the device.
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
