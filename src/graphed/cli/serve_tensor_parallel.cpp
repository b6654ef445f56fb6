// cli/serve_tensor_parallel.cpp — see cli/serve_tensor_parallel.h. The one place that tells one process from
// a tensor-parallel group is serving_processes().
#include "graphed/cli/serve_tensor_parallel.h"

#include <string>
#include <vector>

#include "graphed/config/validation.h"
#include "graphed/dist/peer_collectives.h"
#include "graphed/runtime/device.h"
#include "graphed/util/error.h"
#include "graphed/util/stop_signals.h"
#include "graphed/util/text.h"

namespace graphed::cli {
namespace {

/// The layout of a serving group: `tensor_size` tensor ranks, nothing else.
config::RunConfig serving_layout(const config::ModelConfig& model, int64_t tensor_size, int64_t world_size) {
  config::RunConfig run;
  run.model = model;
  run.train.tensor_model_parallel_size = tensor_size;
  run.train.world_size = world_size;
  run.train.data_parallel_size = 1;
  run.train.sample_tokens = 0;
  return run;
}

void require_split(const config::RunConfig& run) {
  config::IssueList issues;
  config::validate_tensor_parallel_model(run, issues);
  issues.throw_errors("the model cannot be split over the tensor-parallel ranks");
}

/// Answers clients through `calls`; if that throws, the calls are aborted first (the other ranks of a
/// tensor-parallel group stop following instead of waiting).
int answer_through(serve::EngineCalls& calls, const AnswerClients& answer_clients) {
  try {
    return answer_clients(calls);
  } catch (...) {
    calls.abort();
    throw;
  }
}

/// The only process: the model was loaded onto its device, the engine sizes its own cache, and its calls go
/// to the engine alone.
class OneProcess final : public ServingProcesses {
 public:
  void move_to_device(model::GptModel&) override {}
  void agree_on(infer::ServingOptions&, model::GptModel&) override {}
  infer::StepRelay& step_relay() override { return infer::StepRelay::none(); }
  int run(infer::ServingEngine& engine, const AnswerClients& answer_clients) override {
    serve::LocalEngineCalls calls(engine);
    return answer_through(calls, answer_clients);
  }
  void finish() override {}
};

}  // namespace

std::unique_ptr<ServingProcesses> serving_processes(const dist::LaunchEnvironment& environment, int64_t tensor_size,
                                                    const at::Device& device, model::GptModel& model,
                                                    bool peer_all_reduce) {
  if (tensor_size > 1) return std::make_unique<ServingGroup>(environment, tensor_size, device, model, peer_all_reduce);
  return std::make_unique<OneProcess>();
}

void require_serving_launch(const dist::LaunchEnvironment& environment, int64_t tensor_size) {
  if (tensor_size < 1) {
    const std::string message = "--tensor-model-parallel-size must be >= 1, got " + std::to_string(tensor_size) +
                                "; fix: pass a positive value (1: one process)";
    throw ConfigError(message, {message});
  }
  require_one_tensor_group(environment, tensor_size, "graphed serve");
  if (environment.is_distributed() || tensor_size == 1) return;
  const std::string message = "--tensor-model-parallel-size " + std::to_string(tensor_size) +
                              " needs one process "
                              "per rank, and this is one process; fix: launch it with torchrun --nproc-per-node " +
                              std::to_string(tensor_size) +
                              " --no-python graphed serve ..., or drop "
                              "--tensor-model-parallel-size";
  throw ConfigError(message, {message});
}

ServingGroup::ServingGroup(const dist::LaunchEnvironment& environment, int64_t tensor_size, const at::Device& device,
                           model::GptModel& model, bool peer_all_reduce)
    : rank_(environment.rank), device_(device) {
  // A vocabulary that does not split is padded as Megatron pads it (the server never draws the new ids).
  const int64_t vocabulary = model->config().vocab_size;
  prompt_vocabulary_ = vocabulary;
  if (vocabulary % tensor_size != 0) model->pad_vocabulary(model::padded_vocabulary(vocabulary, 128, tensor_size));
  const config::RunConfig layout = serving_layout(model->config(), tensor_size, environment.world_size);
  require_split(layout);
  run_ = std::make_unique<DistributedRun>(layout, environment, device);
  model->split_for_tensor_parallel(dist::make_inference_collectives(run_->groups().tensor(), device, peer_all_reduce));
  // The step broadcast's groups, before the cache takes what memory is left (NCCL sets its buffers up in the
  // first collective): the control group's headers wait as long as the server is idle.
  control_ = run_->groups().make_tensor_group("serving-control", serve::kControlGroupTimeout);
  inputs_ = run_->groups().make_tensor_group("serving-inputs", run_->groups().timeout());
  for (dist::Communicator* group : {&run_->groups().tensor(), control_.get(), inputs_.get()}) {
    group->barrier();  // each group's first collective, outside any graph capture
  }
}

ServingGroup::~ServingGroup() = default;

void ServingGroup::move_to_device(model::GptModel& model) { model->to(device_); }

void ServingGroup::agree_on(infer::ServingOptions& options, model::GptModel& model) {
  const int64_t blocks = infer::ServingEngine::blocks_that_fit(model, device_, options);
  dist::Communicator& world = run_->groups().world();
  at::Tensor mine = at::full({1}, blocks, at::TensorOptions().dtype(at::kLong).device(device_));
  std::vector<at::Tensor> all;
  for (int64_t r = 0; r < world.size(); ++r) all.push_back(at::empty_like(mine));
  world.all_gather(all, mine).wait();
  options.cache_blocks = at::cat(all).min().item<int64_t>();
  options.prompt_vocabulary = prompt_vocabulary_;
  broadcast_ = std::make_unique<serve::StepBroadcast>(*control_, *inputs_, options.max_requests, device_);
}

infer::StepRelay& ServingGroup::step_relay() {
  GRAPHED_INTERNAL_ASSERT(broadcast_ != nullptr, "a serving group's step relay asked for before agree_on");
  return *broadcast_;
}

int ServingGroup::run(infer::ServingEngine& engine, const AnswerClients& answer_clients) {
  if (rank_ != 0) return follow_first_rank(engine);
  serve::FirstRankEngineCalls calls(engine, *broadcast_);
  return answer_through(calls, answer_clients);
}

void ServingGroup::finish() {
  // The followers' last steps may still be queued behind their last header: every rank's device finishes its
  // steps (whose collectives every rank launched) before a group closes. The step broadcast's groups close
  // after the run's, past its barrier, as the run's own groups do.
  runtime::synchronize(device_);
  run_->finish();
  control_->shutdown();
  inputs_->shutdown();
}

int ServingGroup::follow_first_rank(infer::ServingEngine& engine) {
  StopSignals ignored(false, "");
  bool stopped = false;
  try {
    stopped = serve::follow_steps(engine, *broadcast_);
  } catch (const std::exception& error) {
    run_->report_failure(error);  // the first rank must not wait in a collective for this one
    throw;
  }
  if (!stopped) return 1;  // the first rank failed and said why
  finish();
  return 0;
}

}  // namespace graphed::cli
