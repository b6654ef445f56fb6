// config/train_config.h — trainer, optimizer, learning-rate, data, logging and checkpoint settings,
// named after Megatron's flags. Plain aggregate; resolve_run_config() fills the derived fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace graphed::config {

struct TrainConfig {
  int64_t micro_batch_size = 1;              ///< --micro-batch-size, samples per microbatch
  std::optional<int64_t> global_batch_size;  ///< --global-batch-size; unset = micro x data-parallel
  int64_t train_iters = 200;                 ///< --train-iters
  double lr = 3e-4;                          ///< --lr, peak learning rate
  double min_lr = 0.0;                       ///< --min-lr, floor of the decay
  int64_t lr_warmup_iters = 0;               ///< --lr-warmup-iters, linear warmup
  std::string lr_decay_style = "cosine";     ///< --lr-decay-style constant|linear|cosine
  std::optional<int64_t> lr_decay_iters;     ///< --lr-decay-iters; unset = train_iters
  double weight_decay = 0.01;                ///< --weight-decay (AdamW)
  double adam_beta1 = 0.9;                   ///< --adam-beta1
  double adam_beta2 = 0.999;                 ///< --adam-beta2
  double adam_eps = 1e-8;                    ///< --adam-eps
  double clip_grad = 1.0;                    ///< --clip-grad, global grad-norm clip; 0 = off
  int64_t seed = 1234;                       ///< --seed
  int64_t log_interval = 100;                ///< --log-interval, iterations between log lines
  int64_t eval_interval = 1000;              ///< --eval-interval
  int64_t eval_iters = 100;                  ///< --eval-iters, batches per evaluation
  std::optional<std::string> data_path;      ///< --data-path: token file, text file or folder
  std::string token_dtype = "uint16";        ///< --token-dtype uint16|uint32 of .bin token files
  bool mock_data = false;                    ///< --mock-data: synthetic tokens (benchmarks)
  std::string split = "969,30,1";            ///< --split train,valid,test weights
  std::optional<std::string> save;           ///< --save checkpoint folder
  std::optional<std::string> load;           ///< --load checkpoint folder
  std::optional<int64_t> save_interval;      ///< --save-interval; needs --save
  std::optional<std::string> metrics_file;   ///< --metrics-file (JSON lines)
  /// --exit-signal-handler: on SIGINT or SIGTERM, finish the iteration, save (with --save) and exit 0;
  /// unset = on when --save is given.
  std::optional<bool> exit_signal_handler;
  std::string device = "auto";         ///< --device auto|cuda|cpu
  std::string sample_prompt = "The ";  ///< --sample-prompt, text the samples continue
  int64_t sample_tokens = 64;          ///< --sample-tokens per sample; 0 = no samples
  double sample_temperature = 0.8;     ///< --sample-temperature; 0 = greedy
  int64_t sample_top_k = 40;           ///< --sample-top-k; 0 = the whole vocabulary
  // Parallel layout (Megatron's names). Ranks are ordered data-parallel first: rank = pipeline rank x
  // data-parallel size + data-parallel rank.
  int64_t tensor_model_parallel_size = 1;    ///< --tensor-model-parallel-size
  bool sequence_parallel = false;            ///< --sequence-parallel: norms and dropout on sequence shards
  int64_t pipeline_model_parallel_size = 1;  ///< --pipeline-model-parallel-size, pipeline stages
  std::optional<int64_t> num_layers_per_virtual_pipeline_stage;  ///< --num-layers-per-virtual-pipeline-stage
  std::optional<int64_t> data_parallel_size;  ///< --data-parallel-size; unset = world / (tensor x pipeline)
  /// --expert-model-parallel-size: the data-parallel ranks over which each MoE layer's experts are shared out
  /// (Megatron's expert parallelism; divides the data-parallel size and the experts).
  int64_t expert_model_parallel_size = 1;
  /// --expert-tensor-parallel-size: the tensor ranks each expert's ffn is split over (Megatron's expert tensor
  /// size): the tensor size (its default, resolved so) or 1 (every expert whole, the expert groups across the tensor
  /// ranks).
  std::optional<int64_t> expert_tensor_parallel_size;
  /// --use-distributed-optimizer: Megatron's sharded optimizer (ZeRO-1): each data-parallel rank steps its shard of
  /// every gradient bucket and keeps the Adam moments of that shard only; the gradients are reduce-scattered and the
  /// parameters gathered.
  bool use_distributed_optimizer = false;
  /// --overlap-grad-reduce: Megatron's flag, taken for its command lines; graphed overlaps the gradient reduction
  /// with the last backward wherever it can with or without it (train/trainer.cpp), and with it the distributed
  /// optimizer's buckets are Megatron's size, max(40M, 1M x data-parallel size) elements, instead of one per buffer.
  bool overlap_grad_reduce = false;
  /// --overlap-param-gather: the distributed optimizer's gathers of the new weights launch at the start of the next
  /// iteration instead of after the step, each linear waiting for its own bucket (Megatron's forward pre-hooks).
  bool overlap_param_gather = false;
  /// --grad-reduce-in-bf16: the data-parallel gradient sums (all-reduce or the distributed optimizer's reduce-scatter)
  /// run in bf16, half the bytes; graphed still accumulates in fp32, casts each bucket just before its collective and
  /// widens the sums back (Megatron keeps a bf16 gradient buffer instead).
  bool grad_reduce_in_bf16 = false;
  int64_t distributed_timeout_minutes = 10;  ///< --distributed-timeout-minutes, collectives and rendezvous
  int64_t world_size = 1;                    ///< processes of the launch (WORLD_SIZE); not a setting
};

}  // namespace graphed::config
