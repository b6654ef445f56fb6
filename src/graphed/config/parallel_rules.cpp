// config/parallel_rules.cpp — see config/parallel_rules.h: the parallel layout's rules, PL-2 … PL-20 (PL-1,
// the sizes being positive, is validation.cpp's with the other range rules).
#include "graphed/config/parallel_rules.h"

#include <string>

#include "graphed/config/run_config.h"
#include "graphed/config/validation.h"
#include "graphed/util/text.h"

namespace graphed::config {
namespace {

std::string num(double value) { return format_number(value); }
std::string num(int64_t value) { return std::to_string(value); }

/// PL-3 … PL-5: the pipeline's layer split (virtual stages included).
void validate_pipeline_split(const RunConfig& config, IssueList& issues) {
  const TrainConfig& t = config.train;
  const int64_t stages = t.pipeline_model_parallel_size;
  const int64_t layers = config.model.num_layers;
  if (stages < 1 || layers < 1) return;
  if (layers % stages != 0) {
    issues.error("PL-3", "--num-layers " + num(layers) + " does not split evenly over --pipeline-model-parallel-size " +
                             num(stages) + "; fix: pass a stage count that divides " + num(layers) +
                             " or a layer count that is a multiple of " + num(stages));
    return;
  }
  if (!t.num_layers_per_virtual_pipeline_stage) return;
  const int64_t virtual_layers = *t.num_layers_per_virtual_pipeline_stage;
  if (stages == 1) {
    issues.error("PL-4",
                 "--num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size 2 or more "
                 "(the interleaved schedule), got 1; fix: drop it, or pass more pipeline stages");
  } else if (virtual_layers < 1 || (layers / stages) % virtual_layers != 0) {
    issues.error("PL-5", "--num-layers-per-virtual-pipeline-stage " + num(virtual_layers) + " does not divide the " +
                             num(layers / stages) + " layers of each of the " + num(stages) +
                             " pipeline stages; fix: pass a divisor of " + num(layers / stages));
  } else if (virtual_layers == layers / stages) {
    issues.note("PL-5", "--num-layers-per-virtual-pipeline-stage " + num(virtual_layers) + " puts all " +
                            num(layers / stages) + " layers of a stage in one virtual stage: the schedule is 1F1B");
  }
}

/// PL-7 for Mamba layers: Megatron's MambaMixer splits its heads and its groups (B and C) over the tensor
/// ranks. Shapes HY-4 refuses are left to it.
void validate_mamba_tensor_split(const ModelConfig& m, int64_t size, IssueList& issues) {
  if (m.mamba_head_dim < 1 || m.mamba_num_groups < 1 || m.mamba_num_heads.value_or(1) < 1) return;
  if (!m.mamba_num_heads && (2 * m.hidden_size) % m.mamba_head_dim != 0) return;
  const std::string tp = "--tensor-model-parallel-size " + num(size);
  const std::string equal = " (each rank takes an equal part of the Mamba heads and groups); fix: ";
  const int64_t heads = m.mamba_num_heads.value_or(2 * m.hidden_size / m.mamba_head_dim);
  if (heads % size != 0 && m.mamba_num_heads) {
    issues.error("PL-7", "--mamba-num-heads " + num(heads) + " does not split over " + tp + equal +
                             "pass a tensor size that divides " + num(heads) + ", or a multiple of " + num(size) +
                             " heads");
  } else if (heads % size != 0) {
    issues.error("PL-7", "the " + num(heads) + " Mamba heads (2 x --hidden-size " + num(m.hidden_size) +
                             " / --mamba-head-dim " + num(m.mamba_head_dim) + ") do not split over " + tp + equal +
                             "pass a tensor size that divides " + num(heads) +
                             ", or set --mamba-num-heads to a "
                             "multiple of " +
                             num(size));
  }
  if (m.mamba_num_groups % size != 0) {
    issues.error("PL-7", "--mamba-num-groups " + num(m.mamba_num_groups) + " does not split over " + tp + equal +
                             "pass a group count that is a multiple of " + num(size) + " and divides the " +
                             num(heads) + " heads, or a tensor size that divides " + num(m.mamba_num_groups));
  }
}

/// Tensor parallelism splits heads, query groups, the ffn, Mamba's heads and groups and the vocabulary
/// over the ranks (PL-7).
void validate_tensor_split(const RunConfig& config, IssueList& issues) {
  const int64_t size = config.train.tensor_model_parallel_size;
  if (config.train.sequence_parallel && size <= 1) {
    issues.note("PL-9",
                "--sequence-parallel has no effect with --tensor-model-parallel-size 1 (it splits the "
                "sequence over the tensor-parallel ranks); it is ignored");
  }
  if (size <= 1) return;
  const ModelConfig& m = config.model;
  const std::string tp = "--tensor-model-parallel-size " + num(size);
  const auto require_divides = [&](const std::string& what, int64_t value, const std::string& fix) {
    if (value % size == 0) return;
    issues.error("PL-7", what + " " + num(value) + " does not split over " + tp +
                             " (each rank takes an equal part); fix: " + fix);
  };
  if (m.qk_layernorm && m.qk_layernorm_across_heads) {
    issues.error("PL-12", "--qk-layernorm-across-heads normalizes over every head at once, which " + tp +
                              " would split over the ranks; fix: --tensor-model-parallel-size 1, or drop "
                              "--qk-layernorm-across-heads");
  }
  require_divides("--num-attention-heads", m.num_attention_heads,
                  "pass a tensor size that divides " + num(m.num_attention_heads) + ", or more heads");
  const int64_t groups = m.num_query_groups.value_or(m.num_attention_heads);
  if (groups != m.num_attention_heads) {  // without grouped-query attention the heads' rule says it all
    require_divides("--num-query-groups", groups,
                    "pass a tensor size that divides " + num(groups) + " (Megatron splits attention by query groups)");
  }
  if (m.ffn_hidden_size) {
    require_divides("--ffn-hidden-size", *m.ffn_hidden_size, "pass a multiple of " + num(size));
  }
  if (config.train.sequence_parallel) {
    require_divides("--seq-length", m.seq_length,
                    "pass a multiple of " + num(size) +
                        " (--sequence-parallel gives "
                        "each rank an equal part of the sequence), or drop --sequence-parallel");
  }
  const int64_t padded = (m.vocab_size + size - 1) / size * size;
  require_divides("--vocab-size", m.vocab_size,
                  "pass --vocab-size " + num(padded) +
                      " (padded, as Megatron pads "
                      "the vocabulary; a checkpoint of the unpadded model then no "
                      "longer loads)");
  if (m.is_moe()) {
    const bool experts_split = config.train.expert_tensor_parallel_size.value_or(size) == size;
    if (m.moe_ffn_hidden_size && experts_split) {
      require_divides("--moe-ffn-hidden-size", *m.moe_ffn_hidden_size, "pass a multiple of " + num(size));
    }
    if (m.moe_shared_expert_intermediate_size) {
      require_divides("--moe-shared-expert-intermediate-size", *m.moe_shared_expert_intermediate_size,
                      "pass a multiple of " + num(size));
    }
  }
  if (m.attention_dropout > 0.0 || m.hidden_dropout > 0.0) {
    const std::string own = config.train.sequence_parallel ? "every dropout (each rank holds its part of the sequence)"
                                                           : "attention's dropout (each rank holds its heads)";
    issues.note("PL-10", tp + " with dropout (--attention-dropout " + num(m.attention_dropout) + ", --hidden-dropout " +
                             num(m.hidden_dropout) +
                             "): as Megatron's model-parallel "
                             "random states, " +
                             own +
                             " draws from --seed + 2718 + the tensor rank, so the masks "
                             "differ from one GPU's and the losses follow another curve");
  }
  if (config.train.sequence_parallel && config.train.sample_tokens > 0) {
    issues.note("PL-11",
                "--sequence-parallel draws no samples during training (its model takes only sequences "
                "that split over the ranks); --sample-tokens " +
                    num(config.train.sample_tokens) + " is ignored");
  }
  if (m.has_mamba_layers()) validate_mamba_tensor_split(m, size, issues);
}

/// PL-15, PL-16 (a note), PL-17 and PL-20: where the expert groups lie among a stage's tensor and data ranks, with
/// the expert tensor size Megatron's default (the tensor size) or 1. `flag`: the expert-parallel size as given.
void validate_expert_layout(const TrainConfig& t, const std::string& flag, IssueList& issues) {
  const int64_t experts_size = t.expert_model_parallel_size;
  const int64_t model_parallel = t.tensor_model_parallel_size * t.pipeline_model_parallel_size;
  const int64_t data = t.data_parallel_size.value_or(model_parallel > 0 ? t.world_size / model_parallel : 1);
  const int64_t tensor = t.tensor_model_parallel_size;
  const int64_t expert_tensor = t.expert_tensor_parallel_size.value_or(tensor);
  if (expert_tensor != tensor && expert_tensor != 1) {
    issues.error("PL-17", "--expert-tensor-parallel-size " + num(expert_tensor) +
                              " with --tensor-model-parallel-size " + num(tensor) +
                              " is not supported in this version (each expert is split over every tensor rank, "
                              "or over none); fix: pass --expert-tensor-parallel-size " +
                              num(tensor) + " (the default) or 1");
    return;
  }
  if (expert_tensor == tensor && data % experts_size != 0) {
    issues.error("PL-15", flag + " does not divide the data-parallel size " + num(data) + " (WORLD_SIZE " +
                              num(t.world_size) + " / (tensor " + num(tensor) + " x pipeline " +
                              num(t.pipeline_model_parallel_size) +
                              ")): expert-parallel ranks are data-parallel ranks of the dense layers; fix: launch a "
                              "multiple of " +
                              num(experts_size * std::max<int64_t>(1, model_parallel)) +
                              " processes, or pass an expert-parallel size that divides " + num(data));
  } else if (expert_tensor == 1 && (tensor * data) % experts_size != 0) {
    issues.error("PL-15", flag + " does not divide the " + num(tensor * data) + " ranks of a pipeline stage (tensor " +
                              num(tensor) + " x data " + num(data) +
                              "): with --expert-tensor-parallel-size 1 an expert group takes that many ranks of a "
                              "stage; fix: launch a multiple of " +
                              num(experts_size * t.pipeline_model_parallel_size) +
                              " processes, or pass an expert-parallel size that divides " + num(tensor * data));
  }
  if (expert_tensor == 1 && tensor > 1 && !t.sequence_parallel) {
    issues.error("PL-20", "--expert-tensor-parallel-size 1 with --tensor-model-parallel-size " + num(tensor) +
                              " needs --sequence-parallel (with whole experts, each tensor rank sends its own part "
                              "of the sequence to them; without it every tensor rank holds the same tokens, which "
                              "Megatron refuses too); fix: add --sequence-parallel, or drop "
                              "--expert-tensor-parallel-size");
  }
  if (expert_tensor == tensor && tensor > 1 && !t.sequence_parallel) {
    issues.note("PL-16", flag + " with --tensor-model-parallel-size " + num(t.tensor_model_parallel_size) +
                             " and without --sequence-parallel: Megatron refuses this for MoE training; graphed "
                             "runs it (each tensor rank of a data rank routes and sends the same tokens, and the "
                             "experts' partial outputs are summed over the tensor ranks); pass --sequence-parallel "
                             "to split the activations outside the experts as Megatron does");
  }
}

/// MC-27 to MC-29: Megatron's paged stash (--moe-paged-stash) and its sizes.
void validate_paged_stash(const ModelConfig& m, int64_t experts_size, IssueList& issues) {
  if (m.moe_paged_stash_page_size < 1) {
    issues.error("MC-28", "--moe-paged-stash-page-size must be >= 1, got " + num(m.moe_paged_stash_page_size) +
                              "; fix: pass e.g. 64 (Megatron's default)");
  }
  if (m.moe_paged_stash_buffer_size_factor_cuda == 0.0) {
    issues.error("MC-28",
                 "--moe-paged-stash-buffer-size-factor-cuda must not be 0 (the paged stash would hold nothing); fix: "
                 "pass e.g. 1.1 (times the most rows alive at once on a balanced load) or -1.1 (times the most "
                 "real rows alive at once in the first iteration)");
  }
  if (!m.moe_paged_stash || !m.is_moe()) return;
  if (!m.moe_expert_rank_capacity_factor) {
    issues.error("MC-27",
                 "--moe-paged-stash needs --moe-expert-rank-capacity-factor (it keeps the real rows of the fixed "
                 "expert blocks; without blocks there are only real rows, and nothing to save); fix: add "
                 "--moe-expert-rank-capacity-factor (e.g. 2) or drop --moe-paged-stash");
  } else if (experts_size <= 1) {
    issues.warn("MC-29", "--moe-paged-stash has no effect with --expert-model-parallel-size " + num(experts_size) +
                             " (without expert parallelism there are no fixed expert blocks); ignored");
  }
}

/// PL-13, PL-14, PL-17 (without expert parallelism), PL-18 (a note) and validate_expert_layout's: expert parallelism
/// (Megatron's --expert-model-parallel-size) and what this version runs it with.
void validate_expert_parallel(const RunConfig& config, IssueList& issues) {
  const TrainConfig& t = config.train;
  const ModelConfig& m = config.model;
  const int64_t experts_size = t.expert_model_parallel_size;
  if (experts_size <= 1 && m.moe_expert_rank_capacity_factor && m.is_grouped_dropless()) {
    issues.warn("MC-25", "--moe-expert-rank-capacity-factor has no effect with --expert-model-parallel-size " +
                             num(experts_size) +
                             " (without expert parallelism every expert is on this rank, and the grouped GEMM "
                             "already has static shapes); ignored");
  }
  validate_paged_stash(m, experts_size, issues);
  if (t.expert_tensor_parallel_size.value_or(1) < 1) return;  // PL-1's
  if (experts_size <= 1 &&
      t.expert_tensor_parallel_size.value_or(t.tensor_model_parallel_size) != t.tensor_model_parallel_size) {
    issues.error("PL-17", "--expert-tensor-parallel-size " + num(*t.expert_tensor_parallel_size) +
                              " without expert parallelism is not supported in this version (the expert tensor size "
                              "differs from the tensor size only with --expert-model-parallel-size > 1); fix: drop "
                              "--expert-tensor-parallel-size, or add --expert-model-parallel-size");
  }
  if (experts_size <= 1) return;
  const std::string flag = "--expert-model-parallel-size " + num(experts_size);
  if (!m.is_moe()) {
    issues.error("PL-13", flag + " needs MoE layers; fix: pass --num-experts, or drop --expert-model-parallel-size");
    return;
  }
  if (*m.num_experts % experts_size != 0) {
    issues.error("PL-14", "--num-experts " + num(*m.num_experts) + " does not split over " + flag +
                              " (each rank holds an equal share of the experts); fix: pass an expert-parallel size "
                              "that divides " +
                              num(*m.num_experts) + ", or a multiple of " + num(experts_size) + " experts");
  }
  validate_expert_layout(t, flag, issues);
  if (m.moe_token_dispatcher_type != "alltoall") {
    issues.note("PL-18", flag + " with --moe-token-dispatcher-type " + m.moe_token_dispatcher_type +
                             ": graphed exchanges the tokens all-to-all under expert parallelism whichever "
                             "dispatcher is named. The sums are the same as Megatron's allgather dispatcher's "
                             "(which gathers every token to every expert rank and reduce-scatters the outputs); "
                             "all-to-all moves fewer rows. Pass --moe-token-dispatcher-type alltoall to say so");
  }
}

/// PL-25, PL-26: --grad-reduce-in-bf16 casts gradients the model computed in bf16, over several data-parallel ranks.
void validate_gradient_precision(const RunConfig& config, IssueList& issues) {
  const TrainConfig& t = config.train;
  if (!t.grad_reduce_in_bf16) return;
  if (!config.model.bf16) {
    issues.error("PL-25",
                 "--grad-reduce-in-bf16 with --no-bf16: an fp32 run reduces its gradients in fp32 (Megatron ignores "
                 "the flag there); fix: drop --grad-reduce-in-bf16, or drop --no-bf16");
    return;
  }
  const int64_t model_parallel = t.tensor_model_parallel_size * t.pipeline_model_parallel_size;
  if (model_parallel >= 1 && t.world_size == model_parallel) {
    issues.note("PL-26",
                "--grad-reduce-in-bf16 with one data-parallel rank has no effect: no gradient is summed over "
                "data-parallel ranks (launch more of them)");
  }
}

/// PL-22, PL-23: --overlap-param-gather's prerequisites (Megatron's) and where graphed runs it.
void validate_parameter_gather(const RunConfig& config, IssueList& issues) {
  const TrainConfig& t = config.train;
  if (!t.overlap_param_gather) return;
  if (!t.use_distributed_optimizer || !t.overlap_grad_reduce) {
    issues.error("PL-22",
                 "--overlap-param-gather needs --use-distributed-optimizer and --overlap-grad-reduce (as in "
                 "Megatron: it overlaps the distributed optimizer's gathers); fix: add them, or drop "
                 "--overlap-param-gather");
    return;
  }
  std::string refused;
  const CudaGraphImpl impl = config.cuda_graph.impl;
  if (impl == CudaGraphImpl::kLocal || impl == CudaGraphImpl::kTransformerEngine) {
    refused = std::string("--cuda-graph-impl ") + (impl == CudaGraphImpl::kLocal ? "local" : "transformer_engine") +
              " (a layer's graph cannot wait for a gather launched outside it)";
  } else if (t.pipeline_model_parallel_size > 1) {
    refused = "--pipeline-model-parallel-size " + num(t.pipeline_model_parallel_size);
  } else if (config.model.fp8()) {
    refused = "FP8 (its weight casts after the step read the gathered weights)";
  } else if (config.model.is_moe()) {
    refused = "an MoE model (--num-experts)";
  }
  if (refused.empty() && (!config.model.bf16 || !config.model.fused_kernels || t.device == "cpu")) {
    issues.note("PL-24",
                "--overlap-param-gather has no effect without bf16 working copies (--no-bf16, "
                "--no-fused-kernels or --device cpu): the weights are read as they are, so they are gathered "
                "right after the step");
  }
  if (refused.empty()) return;
  issues.error("PL-23", "--overlap-param-gather with " + refused +
                            " is not supported in this version: graphed overlaps the gathers for dense models under "
                            "--cuda-graph-impl none or full_iteration without pipeline parallelism or FP8; fix: drop "
                            "--overlap-param-gather (the gathers then run right after the step)");
}

}  // namespace

void validate_parallel_layout(const RunConfig& config, IssueList& issues) {
  const TrainConfig& t = config.train;
  const int64_t model_parallel = t.tensor_model_parallel_size * t.pipeline_model_parallel_size;
  if (model_parallel < 1) return;
  if (t.world_size % model_parallel != 0 || t.world_size < model_parallel) {
    issues.error("PL-2", "the launch has " + num(t.world_size) +
                             " process(es) (WORLD_SIZE), which is not a multiple of "
                             "--tensor-model-parallel-size x --pipeline-model-parallel-size = " +
                             num(model_parallel) + "; fix: launch a multiple of " + num(model_parallel) +
                             " processes (torchrun --nproc-per-node) or change the pipeline size");
  } else if (t.data_parallel_size && *t.data_parallel_size != t.world_size / model_parallel) {
    issues.error("PL-2", "--data-parallel-size " + num(*t.data_parallel_size) + " disagrees with the launch: " +
                             num(t.world_size) + " process(es) / (tensor x pipeline size " + num(model_parallel) +
                             ") = " + num(t.world_size / model_parallel) +
                             "; fix: drop --data-parallel-size (it follows from the launch) or launch " +
                             num(*t.data_parallel_size * model_parallel) + " processes");
  }
  if (t.use_distributed_optimizer && t.world_size / model_parallel == 1 && t.world_size % model_parallel == 0) {
    issues.note("PL-21",
                "--use-distributed-optimizer with one data-parallel rank shards nothing: the one rank keeps "
                "the whole optimizer state, as without it (launch more data-parallel ranks to share it out)");
  }
  validate_gradient_precision(config, issues);
  validate_parameter_gather(config, issues);
  validate_pipeline_split(config, issues);
  validate_tensor_split(config, issues);
  validate_expert_parallel(config, issues);
  if (t.pipeline_model_parallel_size > 1 && config.cuda_graph.impl == CudaGraphImpl::kFullIteration) {
    issues.error("PL-6", "--cuda-graph-impl full_iteration with --pipeline-model-parallel-size " +
                             num(t.pipeline_model_parallel_size) +
                             " is not supported in this version (the pipeline's "
                             "sends and receives would sit inside one graph per stage); fix: --cuda-graph-impl local "
                             "or transformer_engine, which graph each (layer, microbatch) between the transfers");
  }
}

void validate_tensor_parallel_model(const RunConfig& config, IssueList& issues) {
  validate_tensor_split(config, issues);
}

}  // namespace graphed::config
