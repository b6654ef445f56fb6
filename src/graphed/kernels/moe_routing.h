// kernels/moe_routing.h — the MoE's router and plan, free of ATen, a launch or two each where LibTorch takes several:
// the softmax, top-k and load-balancing sums of the router, the Switch loss, and the counting sort of the assignments
// by expert (kernels/moe_expert_rows.h moves the rows that follow). Every reduction runs in a fixed order in fp32 and
// nothing adds with atomics (integer counts in shared memory aside), so a launch gives the same bits on every run,
// eager or inside a CUDA graph. kernels/moe_routing_ops.h is the face; a launch that fails throws graphed::Error.
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

}  // namespace graphed::kernels
