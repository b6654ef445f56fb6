// cli/unknown_flags.cpp — see cli/unknown_flags.h.
#include "graphed/cli/unknown_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>

#include "graphed/cli/command_line.h"
#include "graphed/config/settings.h"
#include "graphed/util/text.h"

namespace graphed::cli {

/// The flags a command takes, dash spellings (the migrated legacy ones left out).
std::vector<std::string> flags_of(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) {
      if (name.find('_') != std::string::npos) continue;  // the underscore spelling of a dashed flag
      const config::SettingSpec* spec = config::find_setting(name);
      if (spec != nullptr && spec->deprecated) continue;
      names.push_back("--" + name);
    }
  }
  return names;
}

namespace {

/// Other projects' names for graphed's flags (nanoGPT, llm.c, Hugging Face's Trainer and generate,
/// vLLM), for suggestions only: graphed takes Megatron-LM's names.
const std::map<std::string, std::string>& other_names() {
  static const std::map<std::string, std::string> names{
      {"--learning-rate", "--lr"},
      {"--max-lr", "--lr"},
      {"--min-learning-rate", "--min-lr"},
      {"--batch-size", "--micro-batch-size"},
      {"--per-device-train-batch-size", "--micro-batch-size"},
      {"--total-batch-size", "--global-batch-size"},
      {"--gradient-accumulation-steps", "--global-batch-size"},
      {"--max-steps", "--train-iters"},
      {"--max-iters", "--train-iters"},
      {"--num-train-steps", "--train-iters"},
      {"--num-iterations", "--train-iters"},
      {"--steps", "--train-iters"},
      {"--iters", "--train-iters"},
      {"--warmup-steps", "--lr-warmup-iters"},
      {"--warmup-iters", "--lr-warmup-iters"},
      {"--lr-decay-steps", "--lr-decay-iters"},
      {"--lr-scheduler-type", "--lr-decay-style"},
      {"--n-layer", "--num-layers"},
      {"--n-layers", "--num-layers"},
      {"--num-hidden-layers", "--num-layers"},
      {"--n-head", "--num-attention-heads"},
      {"--num-heads", "--num-attention-heads"},
      {"--num-key-value-heads", "--num-query-groups"},
      {"--n-embd", "--hidden-size"},
      {"--d-model", "--hidden-size"},
      {"--intermediate-size", "--ffn-hidden-size"},
      {"--block-size", "--seq-length"},
      {"--context-length", "--seq-length"},
      {"--max-seq-len", "--seq-length"},
      {"--seq-len", "--seq-length"},
      {"--sequence-length", "--seq-length"},
      {"--dropout", "--hidden-dropout"},
      {"--grad-clip", "--clip-grad"},
      {"--max-grad-norm", "--clip-grad"},
      {"--gradient-clipping", "--clip-grad"},
      {"--beta1", "--adam-beta1"},
      {"--beta2", "--adam-beta2"},
      {"--adam-epsilon", "--adam-eps"},
      {"--output-dir", "--save"},
      {"--out-dir", "--save"},
      {"--checkpoint-dir", "--save"},
      {"--resume-from-checkpoint", "--load"},
      {"--init-from", "--load"},
      {"--logging-steps", "--log-interval"},
      {"--eval-steps", "--eval-interval"},
      {"--save-steps", "--save-interval"},
      {"--checkpoint-every", "--save-interval"},
      {"--dataset", "--data-path"},
      {"--data", "--data-path"},
      {"--train-file", "--data-path"},
      {"--input-bin", "--data-path"},
      {"--vocab", "--vocab-size"},
      {"--n-vocab", "--vocab-size"},
      {"--cuda-graph", "--cuda-graph-impl"},
      {"--cuda-graphs", "--cuda-graph-impl"},
      {"--max-tokens", "--max-new-tokens"},
      {"--max-length", "--max-new-tokens"},
      {"--num-tokens", "--max-new-tokens"},
      {"--temp", "--temperature"},
      {"--model", "--hf"},
      {"--model-path", "--hf"},
      {"--stop", "--stop-token"},
      {"--eos-token-id", "--stop-token"},
  };
  return names;
}

/// Megatron-LM's flags that graphed knows and does not take: what graphed does instead, and the fix.
struct NotTaken {
  const char* instead;
  const char* fix;
};

const std::map<std::string, NotTaken>& megatron_flags_not_taken() {
  static const std::map<std::string, NotTaken> flags{
      {"--moe-paged-stash-buffer-size-factor-cpu",
       {"graphed's paged stash has no pinned host pool to spill to in this version: a put that finds the device pool "
        "full marks it overflowed, and the iteration runs again dropless",
        "leave it out, and size the device pool with --moe-paged-stash-buffer-size-factor-cuda"}},
      {"--moe-router-load-balancing-type",
       {"graphed's router always balances with Megatron's default, aux_loss (the Switch loss, scaled by "
        "--moe-aux-loss-coeff); seq_aux_loss, global_aux_loss and sinkhorn are not in this version",
        "leave it out for aux_loss; for none, pass --moe-aux-loss-coeff 0"}},
      {"--moe-z-loss-coeff",
       {"graphed's router has no z-loss in this version (the load-balancing loss is its only one)", "leave it out"}},
      {"--moe-router-score-function",
       {"graphed's router scores with softmax (Megatron's default); sigmoid is not in this version", "leave it out"}},
      {"--moe-router-enable-expert-bias",
       {"graphed's router has no expert bias (aux-loss-free balancing) in this version",
        "leave it out, and balance with --moe-aux-loss-coeff"}},
      {"--moe-router-topk-scaling-factor",
       {"graphed does not scale the routing weights: they are the softmax over the chosen experts (or, with "
        "--moe-router-pre-softmax, their probabilities)",
        "leave it out"}},
      {"--moe-router-dtype",
       {"graphed computes the router's logits in float32 or wider, except under bf16 on a GPU, where the router's "
        "product runs in bf16 and its softmax, top-k and load-balancing sums in float32",
        "leave it out"}},
      {"--moe-token-drop-policy",
       {"drop-and-pad keeps each expert's most probable assignments (Megatron's default policy, probs); position "
        "is not in this version",
        "leave it out"}},
      {"--moe-input-jitter-eps", {"graphed's router does not jitter its input in this version", "leave it out"}},
      {"--moe-flex-dispatcher-backend",
       {"graphed has Megatron's alltoall and allgather token dispatchers, not the flex ones (DeepEP, HybridEP)",
        "leave it out; --expert-model-parallel-size with --moe-token-dispatcher-type alltoall exchanges the tokens"}},
      {"--moe-router-fusion",
       {"on CUDA graphed always runs the router's softmax, top-k and load-balancing sums in its own fused kernels",
        "leave it out"}},
      {"--moe-permute-fusion",
       {"on CUDA graphed always gathers the tokens into expert order and sums them back in its own fused kernels",
        "leave it out"}},
      {"--ddp-bucket-size",
       {"graphed's distributed optimizer uses Megatron's default bucket size, max(40M, 1M x data-parallel size) "
        "elements, with --overlap-grad-reduce (one bucket per buffer without it)",
        "leave it out"}},
  };
  return flags;
}

/// The commands other than `command` that take `flag`, in help order.
std::vector<std::string> commands_taking(const std::string& flag, const std::string& command,
                                         const std::map<std::string, CLI::App*>& subcommands) {
  std::vector<std::string> taking;
  for (const auto& name : command_names()) {
    const auto found = subcommands.find(name);
    if (name == command || found == subcommands.end()) continue;
    const std::vector<std::string> flags = flags_of(*found->second);
    if (std::find(flags.begin(), flags.end(), flag) != flags.end()) taking.push_back(name);
  }
  return taking;
}

}  // namespace

std::string unknown_argument_message(const std::string& argument, const std::string& command,
                                     const std::map<std::string, CLI::App*>& subcommands, bool command_runs_a_model) {
  const std::string help = command.empty() ? "graphed --help" : "graphed " + command + " --help";
  if (argument.rfind("-", 0) != 0) {
    return "unexpected argument '" + argument + "'; fix: flags start with -- (see " + help + ")";
  }
  const std::string name = argument.substr(0, argument.find('='));
  std::string dashed = name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  std::vector<std::string> known;  // the command's flags; every command's before a command is named
  for (const auto& [name, app] : subcommands) {
    if (!command.empty() && name != command) continue;
    for (const std::string& flag : flags_of(*app)) known.push_back(flag);
  }
  const std::string fix = "; fix: see " + help + " for its flags";
  const auto other = other_names().find(dashed);
  if (other != other_names().end() && std::find(known.begin(), known.end(), other->second) != known.end()) {
    return "unknown flag '" + name + "' (did you mean " + other->second + "? graphed takes Megatron-LM's flag names)" +
           fix;
  }
  if (const std::vector<std::string> elsewhere = commands_taking(dashed, command, subcommands); !elsewhere.empty()) {
    std::string message =
        "'" + name + "' is not a flag of graphed " + command + " (it is one of graphed " + join(elsewhere, ", ") + ")";
    const bool model_setting = config::find_setting(dashed) != nullptr || dashed == "--preset" || dashed == "--config";
    if (command_runs_a_model && model_setting) {
      return message + "; fix: leave it out: " + command + " takes the model and its settings from --load or --hf";
    }
    return message + fix;
  }
  if (const auto megatron = megatron_flags_not_taken().find(dashed); megatron != megatron_flags_not_taken().end()) {
    return "'" + name + "' is Megatron-LM's, and graphed does not take it: " + megatron->second.instead +
           "; fix: " + megatron->second.fix;
  }
  std::string message = "unknown flag '" + name + "'";
  if (const auto near = nearest_match(dashed, known)) message += " (did you mean " + *near + "?)";
  return message + fix;
}

}  // namespace graphed::cli
