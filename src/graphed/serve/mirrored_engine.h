// serve/mirrored_engine.h — a tensor-parallel group serving as one. The first rank's engine loop makes every
// request, cancellation and step through MirroredEngineCalls, which writes them, one batch a step, to the
// launch's store; each other rank runs follow_engine, which makes the same calls on its own engine in the
// same order. Every rank's engine then schedules, runs (the model's collectives inside its steps) and draws
// alike, and only the first rank answers clients.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "graphed/serve/engine_calls.h"

namespace graphed::serve {

/// One call on the engine, as the first rank made it.
struct EngineCommand {
  enum class Kind { kAdd, kCancel, kStep, kStop, kAbort };  ///< kAbort: the first rank failed
  Kind kind = Kind::kStep;
  std::vector<int64_t> prompt;    ///< kAdd
  infer::RequestOptions options;  ///< kAdd
  int64_t id = 0;                 ///< kCancel
};

/// Batches of commands from the first rank to the others, in order, through the launch's store: batch n
/// goes to key "serve/n/<rank>" for each other rank, which takes it and deletes it.
class CommandChannel {
 public:
  /// store: a connection to the launch's store; rank, ranks: this rank and the group's size.
  CommandChannel(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t ranks);
  /// The first rank: the next batch to every other rank.
  void publish(const std::vector<EngineCommand>& commands);
  /// Another rank: the next batch, waiting as long as it takes (the rank monitor ends a group whose first
  /// rank died). Polls the store, backing off to 10 ms while the server is idle.
  std::vector<EngineCommand> receive();

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  int64_t rank_;
  int64_t ranks_;
  int64_t sequence_ = 0;
};

/// The first rank's engine calls: each is made here and told to the other ranks before the next step.
class MirroredEngineCalls final : public EngineCalls {
 public:
  MirroredEngineCalls(infer::ServingEngine& engine, CommandChannel& channel) : engine_(engine), channel_(channel) {}
  int64_t add_request(std::vector<int64_t> prompt, infer::RequestOptions options) override;
  void cancel(int64_t id) override;
  infer::StepResult step() override;
  /// Tells the other ranks to stop following.
  void finish() override;
  /// Tells the other ranks that this one failed: they stop following and leave without waiting for it.
  void abort() override;

 private:
  /// Sends the calls since the last batch, then `last`, to the other ranks.
  void publish_with(EngineCommand::Kind last);

  infer::ServingEngine& engine_;
  CommandChannel& channel_;
  std::vector<EngineCommand> pending_;  // the calls since the last step
};

/// Another rank: makes the first rank's calls on `engine`, in order, until it says stop (true) or that it
/// failed (false).
bool follow_engine(infer::ServingEngine& engine, CommandChannel& channel);

}  // namespace graphed::serve
