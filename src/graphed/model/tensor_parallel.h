// model/tensor_parallel.h — tensor parallelism as the model sees it: the collectives a rank needs over its
// tensor-parallel group (dist/ implements them; the model only calls them), and Megatron's four region
// mappings (mappings.py) as autograd functions. A column-parallel layer enters its region through
// copy_to_tensor_region and a row-parallel one leaves through reduce_from_tensor_region, so the forward
// has one all-reduce per pair and the backward one too. TensorParallel is what a layer holds: its group, or
// one rank, where every mapping is the identity; the model is split once (GptModel::split_for_tensor_parallel).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "graphed/capture/random_stream.h"
#include "graphed/model/tensor_shards.h"

namespace graphed::model {

class TensorCollectives {
 public:
  virtual ~TensorCollectives() = default;
  virtual int64_t size() const = 0;
  virtual int64_t rank() const = 0;
  /// The sum of `tensor` over the ranks, in a fixed rank order (the same bits on every rank).
  virtual at::Tensor all_reduce_sum(const at::Tensor& tensor) = 0;
  /// Every rank's `tensor` (the same shape on each), concatenated along `dim` in rank order.
  virtual at::Tensor all_gather(const at::Tensor& tensor, int64_t dim) = 0;
  /// This rank's part of `dim` (which divides by the ranks) of the sum over the ranks.
  virtual at::Tensor reduce_scatter_sum(const at::Tensor& tensor, int64_t dim) = 0;
};

/// Forward: the input as is; backward: the gradient summed over the ranks (the input of a column-parallel
/// layer, which every rank uses whole).
at::Tensor copy_to_tensor_region(const at::Tensor& input, TensorCollectives& collectives);
/// Forward: the partial results summed over the ranks (the output of a row-parallel layer); backward: the
/// gradient as is.
at::Tensor reduce_from_tensor_region(const at::Tensor& input, TensorCollectives& collectives);
/// Forward: every rank's part of the last dimension gathered; backward: this rank's part of the gradient.
at::Tensor gather_from_tensor_region(const at::Tensor& input, TensorCollectives& collectives);
/// Forward: this rank's part of the last dimension; backward: every rank's gradient part gathered.
at::Tensor scatter_to_tensor_region(const at::Tensor& input, TensorCollectives& collectives);
/// Sequence parallelism (Megatron's gather_from_sequence_parallel_region): forward, every rank's part of
/// dimension 1 (the sequence of [batch, sequence, ...]) gathered; backward, the gradient reduce-scattered.
at::Tensor gather_from_sequence_region(const at::Tensor& input, TensorCollectives& collectives);
/// Forward: the ranks' partial results summed, this rank's part of dimension 1 kept (reduce-scatter);
/// backward: the gradient parts gathered (Megatron's reduce_scatter_to_sequence_parallel_region).
at::Tensor reduce_scatter_to_sequence_region(const at::Tensor& input, TensorCollectives& collectives);

/// Replaces each of `module`'s own parameters named in `splits` (not its children's) by this rank's shard of it.
void keep_own_shards(torch::nn::Module& module, const std::vector<std::pair<std::string, ParameterSplit>>& splits,
                     TensorShard shard);

/// A layer's tensor-parallel group, chosen once when the model is split. With one rank (the default) every
/// call returns its input: the layers run as they always did. With sequence parallelism (Megatron's
/// --sequence-parallel) the activations between the parallel layers are each rank's part of the sequence:
/// entering gathers the sequence, leaving reduce-scatters it, in place of the all-reduce.
class TensorParallel {
 public:
  TensorParallel() = default;
  /// collectives: the group (outlives the model's steps); null means one rank. random: this rank's
  /// model-parallel stream (Megatron: seed + 2718 + tensor rank), for dropout inside the tensor-parallel
  /// regions; null where no such dropout runs.
  explicit TensorParallel(std::shared_ptr<TensorCollectives> collectives, bool sequence_parallel = false,
                          std::shared_ptr<capture::RandomStream> random = nullptr)
      : collectives_(std::move(collectives)),
        sequence_parallel_(collectives_ != nullptr && sequence_parallel),
        random_(std::move(random)) {}

  int64_t size() const { return collectives_ ? collectives_->size() : 1; }
  int64_t rank() const { return collectives_ ? collectives_->rank() : 0; }
  TensorShard shard() const { return {size(), rank()}; }
  bool sequence_parallel() const { return sequence_parallel_; }
  /// Into a column-parallel layer (copy_to_tensor_region; gather_from_sequence_region with sequence parallelism).
  at::Tensor enter(const at::Tensor& input) const;
  /// Out of a row-parallel layer: the ranks' partial results summed (reduce_from_tensor_region;
  /// reduce_scatter_to_sequence_region with sequence parallelism).
  at::Tensor leave(const at::Tensor& partial) const;
  /// With sequence parallelism, every rank's part of dimension 1 gathered (gather_from_sequence_region: the
  /// gradient reduce-scattered back); else `tensor`. What an MoE layer's dispatch sees: every token.
  at::Tensor all_of_sequence(const at::Tensor& tensor) const {
    return sequence_parallel_ ? gather_from_sequence_region(tensor, *collectives_) : tensor;
  }
  /// With sequence parallelism, the sum over the ranks of a quantity each computed from its part of the
  /// sequence (reduce_from_tensor_region: the gradient as is); else `tensor`.
  at::Tensor sum_of_sequence_parts(const at::Tensor& tensor) const {
    return sequence_parallel_ ? reduce_from_tensor_region(tensor, *collectives_) : tensor;
  }
  /// This rank's part of dimension `dim` of `tensor` with sequence parallelism (a plain slice: its gradient
  /// is this rank's part), else `tensor`.
  at::Tensor sequence_part(const at::Tensor& tensor, int64_t dim) const;
  /// A column-parallel output whole again: every rank's last-dimension part (gather_from_tensor_region).
  at::Tensor gather(const at::Tensor& part) const;
  /// `tensor` on the first rank, undefined on the others: what a row-parallel layer adds once before its
  /// sum (its bias, in decoding the residual stream).
  at::Tensor on_first_rank(const at::Tensor& tensor) const { return rank() == 0 ? tensor : at::Tensor(); }
  /// Megatron's model-parallel RNG rule: `work` (a dropout inside a tensor-parallel region: attention's,
  /// and with sequence parallelism every dropout on a sequence part) draws from this rank's own stream, so
  /// the ranks' masks differ; the default generator stays where it was. Without a stream, `work` as is.
  at::Tensor with_rank_random(const std::function<at::Tensor()>& work) const;

  /// Megatron's vocab-parallel embedding: rows of `tokens` [...] from this rank's part `table` of the
  /// vocabulary (rows [rank x part, (rank + 1) x part)), zero for tokens outside it, summed over the ranks.
  at::Tensor embedding(const at::Tensor& table, const at::Tensor& tokens) const;
  /// Megatron's vocab-parallel cross-entropy: the mean over tokens of -log softmax(logits)[label] for
  /// this rank's part `logits` [tokens, vocabulary / size] (float32) of the logits, which are never gathered.
  at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels) const;

 private:
  std::shared_ptr<TensorCollectives> collectives_;
  bool sequence_parallel_ = false;
  std::shared_ptr<capture::RandomStream> random_;
};

}  // namespace graphed::model
