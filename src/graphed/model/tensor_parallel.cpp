// model/tensor_parallel.cpp — see model/tensor_parallel.h. Each mapping is an autograd function whose
// context keeps the collectives by address (they outlive the step's graph: they belong to the run).
#include "graphed/model/tensor_parallel.h"

#include <torch/csrc/autograd/custom_function.h>

#include "graphed/util/error.h"

namespace graphed::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

TensorCollectives& kept(AutogradContext* context) {
  return *reinterpret_cast<TensorCollectives*>(context->saved_data["collectives"].toInt());
}

/// This rank's part of the last dimension (which must divide by the ranks).
at::Tensor own_part(const at::Tensor& tensor, TensorCollectives& collectives) {
  const int64_t width = tensor.size(-1);
  GRAPHED_INTERNAL_ASSERT(width % collectives.size() == 0, "a last dimension of ", width, " split ", collectives.size(),
                          " ways");
  const int64_t part = width / collectives.size();
  return tensor.narrow(-1, collectives.rank() * part, part).contiguous();
}

struct CopyToRegion : torch::autograd::Function<CopyToRegion> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, int64_t collectives) {
    context->saved_data["collectives"] = collectives;
    return input.view_as(input);
  }
  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    return {kept(context).all_reduce_sum(grads[0]), at::Tensor()};
  }
};

struct ReduceFromRegion : torch::autograd::Function<ReduceFromRegion> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& input, int64_t collectives) {
    return reinterpret_cast<TensorCollectives*>(collectives)->all_reduce_sum(input);
  }
  static tensor_list backward(AutogradContext*, tensor_list grads) { return {grads[0], at::Tensor()}; }
};

struct GatherFromRegion : torch::autograd::Function<GatherFromRegion> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, int64_t collectives) {
    context->saved_data["collectives"] = collectives;
    return reinterpret_cast<TensorCollectives*>(collectives)->all_gather(input, input.dim() - 1);
  }
  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    return {own_part(grads[0], kept(context)), at::Tensor()};
  }
};

struct ScatterToRegion : torch::autograd::Function<ScatterToRegion> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, int64_t collectives) {
    context->saved_data["collectives"] = collectives;
    return own_part(input, *reinterpret_cast<TensorCollectives*>(collectives));
  }
  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const at::Tensor& grad = grads[0];
    return {kept(context).all_gather(grad.contiguous(), grad.dim() - 1), at::Tensor()};
  }
};

struct GatherFromSequence : torch::autograd::Function<GatherFromSequence> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, int64_t collectives) {
    context->saved_data["collectives"] = collectives;
    return reinterpret_cast<TensorCollectives*>(collectives)->all_gather(input, 1);
  }
  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    return {kept(context).reduce_scatter_sum(grads[0].contiguous(), 1), at::Tensor()};
  }
};

struct ReduceScatterToSequence : torch::autograd::Function<ReduceScatterToSequence> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, int64_t collectives) {
    context->saved_data["collectives"] = collectives;
    return reinterpret_cast<TensorCollectives*>(collectives)->reduce_scatter_sum(input, 1);
  }
  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    return {kept(context).all_gather(grads[0].contiguous(), 1), at::Tensor()};
  }
};

int64_t address(TensorCollectives& collectives) { return reinterpret_cast<int64_t>(&collectives); }

/// Megatron's _VocabParallelCrossEntropy: the softmax's maximum and denominator and the label's logit
/// combined over the ranks (each rank's logits part stays where it is); per-token losses, the same on every rank.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& logits, const at::Tensor& labels,
                            int64_t collectives) {
    TensorCollectives& group = *reinterpret_cast<TensorCollectives*>(collectives);
    const int64_t part = logits.size(1);
    const at::Tensor local_maximum = std::get<0>(logits.max(1, /*keepdim=*/true));  // [tokens, 1]
    const at::Tensor maximum = group.all_gather(local_maximum, 1).amax(1, /*keepdim=*/true);
    const at::Tensor shifted = logits - maximum;
    const at::Tensor exponentials = shifted.exp();
    const at::Tensor denominator = group.all_reduce_sum(exponentials.sum(1));  // [tokens]
    const at::Tensor local = labels - group.rank() * part;
    const at::Tensor outside = (local < 0).logical_or(local >= part);
    const at::Tensor index = local.masked_fill(outside, 0);
    const at::Tensor own_label_logit = shifted.gather(1, index.unsqueeze(1)).squeeze(1).masked_fill(outside, 0);
    const at::Tensor picked = group.all_reduce_sum(own_label_logit);  // the label's logit, from the rank holding it
    context->save_for_backward({exponentials / denominator.unsqueeze(1), index, outside});
    return denominator.log() - picked;
  }
  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    const at::Tensor& index = saved[1];
    // softmax - one_hot(label) on the rank holding the label, softmax elsewhere.
    const at::Tensor one_hot = saved[2].logical_not().to(saved[0].scalar_type()).unsqueeze(1);
    at::Tensor grad = saved[0].scatter_add(1, index.unsqueeze(1), -one_hot);
    return {grad * grads[0].unsqueeze(1), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor copy_to_tensor_region(const at::Tensor& input, TensorCollectives& collectives) {
  return CopyToRegion::apply(input, address(collectives));
}

at::Tensor reduce_from_tensor_region(const at::Tensor& input, TensorCollectives& collectives) {
  return ReduceFromRegion::apply(input, address(collectives));
}

at::Tensor gather_from_tensor_region(const at::Tensor& input, TensorCollectives& collectives) {
  return GatherFromRegion::apply(input, address(collectives));
}

at::Tensor scatter_to_tensor_region(const at::Tensor& input, TensorCollectives& collectives) {
  return ScatterToRegion::apply(input, address(collectives));
}

at::Tensor gather_from_sequence_region(const at::Tensor& input, TensorCollectives& collectives) {
  return GatherFromSequence::apply(input, address(collectives));
}

at::Tensor reduce_scatter_to_sequence_region(const at::Tensor& input, TensorCollectives& collectives) {
  return ReduceScatterToSequence::apply(input, address(collectives));
}

void keep_own_shards(torch::nn::Module& module, const std::vector<std::pair<std::string, ParameterSplit>>& splits,
                     TensorShard shard) {
  const auto own = module.named_parameters(/*recurse=*/false);
  for (const auto& [name, split] : splits) {
    if (!own.contains(name)) continue;  // a child's, which the child splits itself
    at::Tensor parameter = own[name];
    // A copy of its own: a slice would keep the whole tensor's memory alive.
    parameter.set_data(take_shard(parameter.detach(), split, shard).clone());
  }
}

at::Tensor TensorParallel::enter(const at::Tensor& input) const {
  if (!collectives_) return input;
  return sequence_parallel_ ? gather_from_sequence_region(input, *collectives_)
                            : copy_to_tensor_region(input, *collectives_);
}

at::Tensor TensorParallel::leave(const at::Tensor& partial) const {
  if (!collectives_) return partial;
  return sequence_parallel_ ? reduce_scatter_to_sequence_region(partial, *collectives_)
                            : reduce_from_tensor_region(partial, *collectives_);
}

at::Tensor TensorParallel::sequence_part(const at::Tensor& tensor, int64_t dim) const {
  if (!sequence_parallel_) return tensor;
  const int64_t part = tensor.size(dim) / size();
  return tensor.narrow(dim, rank() * part, part);
}

at::Tensor TensorParallel::gather(const at::Tensor& part) const {
  return collectives_ ? gather_from_tensor_region(part, *collectives_) : part;
}

at::Tensor TensorParallel::embedding(const at::Tensor& table, const at::Tensor& tokens) const {
  if (!collectives_) return at::embedding(table, tokens);
  const int64_t part = table.size(0);
  const at::Tensor local = tokens - rank() * part;
  const at::Tensor outside = (local < 0).logical_or(local >= part);
  const at::Tensor rows = at::embedding(table, local.masked_fill(outside, 0)).masked_fill(outside.unsqueeze(-1), 0);
  return leave(rows);
}

at::Tensor TensorParallel::cross_entropy(const at::Tensor& logits, const at::Tensor& labels) const {
  if (!collectives_) return at::cross_entropy_loss(logits, labels);
  return VocabParallelCrossEntropy::apply(logits, labels, address(*collectives_)).mean();
}

at::Tensor TensorParallel::with_rank_random(const std::function<at::Tensor()>& work) const {
  if (!random_) return work();
  const capture::RandomStream::Fork fork(*random_);
  return work();
}

}  // namespace graphed::model
