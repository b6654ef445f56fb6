// model/gpt_model.h — the GPT decoder: token (+ learned position) embeddings, dropout, the
// transformer layers, final norm and the output layer (tied to the embedding unless
// --untie-embeddings-and-output-weights), cross-entropy loss in fp32 plus the MoE auxiliary losses.
// Built from a resolved config::ModelConfig; initialized on the CPU from the current seed so a run
// starts from the same weights on every device. Besides the layers' units it has two graphable
// stage units, called through capture::UnitRunners (eager by default):
//   kEmbedding  {tokens} -> {hidden}           first stage: embeddings, positions, dropout
//   kLoss       {hidden, labels} -> {lm_loss}  last stage: final norm, output layer, cross-entropy
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "graphed/capture/unit_runner.h"
#include "graphed/config/model_config.h"
#include "graphed/kernels/paged_stash.h"
#include "graphed/model/expert_parallel.h"
#include "graphed/model/norm.h"
#include "graphed/model/tensor_parallel.h"
#include "graphed/model/transformer_layer.h"

namespace graphed::model {

class Fp8WeightsPath;

struct GptOutput {
  at::Tensor loss;      ///< lm_loss + aux_loss: what backward runs on
  at::Tensor lm_loss;   ///< mean token cross-entropy, float32 scalar
  at::Tensor aux_loss;  ///< sum of the MoE layers' load-balancing losses (undefined when dense)
};

/// A pipeline stage's share of the model: layers [first_layer, end_layer), with the embedding when it
/// is the first stage and the final norm, output layer and loss when it is the last.
struct LayerRange {
  int64_t first_layer = 0;
  int64_t end_layer = 0;
  bool first_stage = true;
  bool last_stage = true;
};

/// What a stage's forward gives: hidden states for the next stage, or the losses on the last.
struct ChunkOutput {
  at::Tensor hidden;    ///< [batch, seq, hidden] (not the last stage)
  at::Tensor lm_loss;   ///< float32 scalar (last stage only)
  at::Tensor aux_loss;  ///< this stage's MoE load-balancing losses (undefined when it has none)
};

/// The model's units outside its layers (Megatron's first and last pipeline stage work).
enum class StageUnit { kEmbedding, kLoss };
/// "embedding", "loss"
const char* to_string(StageUnit unit);

/// What each layer of the decoder holds: by the resolved hybrid pattern on a hybrid model
/// (config.is_hybrid_model), else attention and an MLP, or an MoE where moe_layers says so.
std::vector<LayerParts> decoder_layer_parts(const config::ModelConfig& config, const std::vector<bool>& moe_layers);

/// How generate() picks each next token.
struct Sampling {
  double temperature = 0.0;  ///< 0 = greedy (argmax); else softmax(logits / temperature)
  int64_t top_k = 0;         ///< draw among the k likeliest tokens; 0 = all
  uint64_t seed = 0;         ///< seeds the sampling generator: the same seed gives the same text
  /// Draw only ids below this: the tokenizer's, where the model's vocabulary is padded past them
  /// (a byte-level run's 256 in a table of --vocab-size rows). 0 = every id.
  int64_t vocabulary = 0;
};

class GptModelImpl : public torch::nn::Module {
 public:
  /// moe_layers: one flag per layer (RunConfig::moe_layers). A hybrid model (config.is_hybrid_model)
  /// takes its layers from the resolved hybrid_override_pattern instead (model/transformer_layer.h).
  GptModelImpl(const config::ModelConfig& config, const std::vector<bool>& moe_layers);

  /// tokens, labels: [batch, seq] int64. microbatch: which microbatch of the iteration this is
  /// (0-based; the runners of per-microbatch graph slots pick theirs by it).
  GptOutput forward(const at::Tensor& tokens, const at::Tensor& labels, int64_t microbatch);
  /// One pipeline stage's forward of microbatch `microbatch`: the first stage embeds `input` (tokens),
  /// the others continue from it (hidden states); the last stage returns the LM loss over `labels`.
  ChunkOutput forward_chunk(const LayerRange& range, const at::Tensor& input, const at::Tensor& labels,
                            int64_t microbatch);
  /// Logits [batch, seq, vocab] (float32) for the tokens (eager, outside the stage units).
  at::Tensor logits(const at::Tensor& tokens);
  /// Continuation: appends new_tokens ids to the prompt (a window of the last seq_length tokens is
  /// fed each step), drawn as `sampling` says. Runs in eval mode without grad and restores the
  /// training mode; draws from a generator of its own, so training's random state is untouched.
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t new_tokens, const Sampling& sampling = {});

  /// Inference pieces (eval mode, no dropout): the embeddings of `tokens` [b, s] at `positions` [b, s],
  /// and the float32 next-token logits of hidden states [..., h] (final norm, output layer; the norm
  /// and the output layer through Norm::then_linear).
  at::Tensor embed_at(const at::Tensor& tokens, const at::Tensor& positions);
  at::Tensor decode_logits(const at::Tensor& hidden);

  std::vector<TransformerLayer>& layers() { return layers_; }
  const config::ModelConfig& config() const { return config_; }

  /// A stage unit as a graphable function over tensors, named "embedding" or "loss".
  capture::GraphableUnit stage_unit(StageUnit unit);
  /// Routes a stage unit through a runner; use_eager_stage_runner puts the eager one back.
  void set_stage_runner(StageUnit unit, std::shared_ptr<capture::UnitRunner> runner);
  void use_eager_stage_runner(StageUnit unit);

  /// The kernels every layer runs (model/kernel_path.h), chosen once where the model is assembled: by
  /// default the ATen path, with decode kernels unless the config turns fused kernels off; the trainer's
  /// fused path (model/fused_path.h: fused kernels over working copies of the weights).
  void use_kernel_path(std::shared_ptr<const KernelPath> path);
  /// After use_kernel_path: layer n (counted from 1, as Megatron does, across pipeline stages) runs
  /// path_of(n) instead, e.g. FP8 except the first and last layers (model/fp8_path.h).
  void use_layer_kernel_paths(const std::function<std::shared_ptr<const KernelPath>(int64_t layer_number)>& path_of);
  /// After each optimizer step: every distinct path the model runs moves on once (KernelPath::end_step).
  void end_step();
  /// After the weights' working copies were loaded: every distinct path remakes what it made from them once
  /// (KernelPath::weights_loaded).
  void weights_loaded();
  /// Decoding with FP8 weights (--quantization fp8, model/fp8_weights_path.h): the layers' matrices (not MoE
  /// experts or routers, which never take the path) and the output layer's weight, cast once, over the current path.
  std::shared_ptr<const Fp8WeightsPath> use_fp8_weights();

  /// Tensor parallelism (Megatron's layout): keeps this rank's part of every layer's attention and MLP and
  /// of the vocabulary (the embedding and the output layer, vocab-parallel, the loss computed without
  /// gathering the logits); norms and position embeddings stay whole. Once, right after construction (the
  /// whole model, built from the seed, is what every rank splits). The sizes must divide (config rule PL-7).
  /// sequence_parallel: Megatron's --sequence-parallel for training (model/tensor_parallel.h): the
  /// layers' inputs and outputs are sequence parts, and the norms' and position embeddings' gradients
  /// are each rank's part of the sum (the trainer adds them up). Decoding then needs whole sequences split.
  /// random: this rank's model-parallel stream, which attention's dropout (and with sequence parallelism every
  /// dropout) draws from (TensorParallel::with_rank_random); null without dropout.
  /// split_experts: false keeps every MoE expert whole (Megatron's expert tensor size 1, MoeImpl::keep_experts_whole;
  /// with expert parallelism only).
  void split_for_tensor_parallel(std::shared_ptr<TensorCollectives> collectives, bool sequence_parallel = false,
                                 std::shared_ptr<capture::RandomStream> random = nullptr, bool split_experts = true);
  /// Pads the vocabulary to `vocabulary` ids (Megatron's padding, so that it splits): the embedding and the
  /// output layer get zero rows, whose ids a server never draws (it draws below the tokenizer's size). For
  /// inference, before split_for_tensor_parallel.
  void pad_vocabulary(int64_t vocabulary);
  /// The split of every parameter that is not whole on every rank, by its name in named_parameters().
  std::map<std::string, ParameterSplit> tensor_splits() const;
  const TensorParallel& tensor_parallel() const { return tensor_; }
  /// Expert parallelism: each MoE layer keeps its share of the experts and exchanges tokens over `collectives`
  /// (MoeImpl::split_for_expert_parallel). Once, right after construction (after split_for_tensor_parallel where
  /// both split the model: the expert group is then the ranks of this tensor rank).
  void split_for_expert_parallel(std::shared_ptr<ExpertCollectives> collectives);
  /// The split over the expert-parallel ranks of every expert tensor, by its name in named_parameters() (empty
  /// for a dense model): dimension 0, the global expert id.
  std::map<std::string, ParameterSplit> expert_splits() const;
  /// Under expert parallelism with a rank capacity factor: every MoE layer's overflow since the last call, int64
  /// [3] {a block overflowed 0/1, the most rows a block had to hold, the paged stash overflowed 0/1} on the device
  /// (zeros where none overflowed), and reset. Undefined where no MoE filled a block and there is no paged stash.
  at::Tensor take_moe_overflow();
  /// Before each iteration's forward and backward, outside any CUDA-graph capture: the paged stash's pools sized
  /// after the first iteration, and emptied (kernels::PagedStash::begin_iteration). Nothing without one.
  void begin_iteration() {
    if (paged_stash_) paged_stash_->begin_iteration();
  }
  /// --moe-paged-stash under expert parallelism: the stash every MoE layer shares; else null.
  const kernels::PagedStash* paged_stash() const { return paged_stash_.get(); }
  /// Every MoE layer's static dispatch gives way to the dropless one (`dropless`), or takes over again.
  void use_dropless_experts(bool dropless);

 private:
  /// `visit` once for each distinct path the model runs.
  void for_each_path(const std::function<void(const KernelPath&)>& visit) const;
  at::Tensor embed(const at::Tensor& tokens);
  /// Logits [..., vocab] (float32) of hidden states, gathered over the tensor-parallel ranks.
  at::Tensor output_logits(const at::Tensor& hidden);
  /// This rank's part of the logits [..., vocab / tensor size] (float32) of hidden states.
  at::Tensor output_logits_part(const at::Tensor& hidden);
  /// The output layer's weight: its own when untied, else the word embeddings.
  const at::Tensor& output_layer_weight() const { return output_weight_.defined() ? output_weight_ : word_embeddings_; }
  at::Tensor lm_loss(const at::Tensor& hidden, const at::Tensor& labels);

  config::ModelConfig config_;
  at::Tensor word_embeddings_;      // [vocab, hidden]
  at::Tensor position_embeddings_;  // [max positions, hidden] (learned_absolute only)
  at::Tensor output_weight_;        // [vocab, hidden] (untied only)
  torch::nn::ModuleList layer_list_;
  std::vector<TransformerLayer> layers_;
  Norm final_norm_{nullptr};
  std::array<std::shared_ptr<capture::UnitRunner>, 2> stage_runners_;
  std::shared_ptr<const KernelPath> path_ = aten_path();
  std::vector<std::shared_ptr<const KernelPath>> layer_paths_;  ///< each layer's, where use_layer_kernel_paths set one
  TensorParallel tensor_;
  std::shared_ptr<kernels::PagedStash> paged_stash_;  ///< --moe-paged-stash with expert parallelism
};
TORCH_MODULE(GptModel);

}  // namespace graphed::model
