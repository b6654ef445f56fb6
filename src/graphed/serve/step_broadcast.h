// serve/step_broadcast.h — a tensor-parallel group serving as one, with one scheduler. The first rank's engine
// schedules every step and, through StepBroadcast (its step relay), broadcasts what the other ranks need to launch
// the very same step: the step's order (infer/step_order.h) as a fixed-length header, then the step's packed
// inputs. The others run follow_steps: they receive each header and have their engine follow it; they never see a
// request or read a drawn token. Two communicators over the group carry the two: the control one the headers, on a
// side stream of their own (a header never waits for the step running on the compute stream, and a follower's host
// waits for nothing else), with a timeout longer than any idle period, since an idle server sends nothing for as
// long as nobody asks; the inputs one the inputs, on the step's stream, in place in the buffer the step reads. On
// CPUs (Gloo) the same code moves CPU tensors and the host waits for each transfer.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/capture/cuda_graph.h"
#include "graphed/dist/communicator.h"
#include "graphed/infer/serving_engine.h"
#include "graphed/infer/step_relay.h"
#include "graphed/serve/engine_calls.h"

namespace graphed::serve {

/// The control group's timeout for each operation: far longer than any idle period of a server (a follower's
/// header receive waits as long as nobody asks anything).
inline constexpr std::chrono::hours kControlGroupTimeout{24 * 30};

class StepBroadcast final : public infer::StepRelay {
 public:
  /// `control`, `inputs`: two communicators over the group's ranks, the first rank the one that schedules (not
  /// owned; they outlive this). `max_requests`: the engines' (it fixes the header's length); `device`: this rank's.
  StepBroadcast(dist::Communicator& control, dist::Communicator& inputs, int64_t max_requests,
                const at::Device& device);
  ~StepBroadcast() override;
  StepBroadcast(const StepBroadcast&) = delete;
  StepBroadcast& operator=(const StepBroadcast&) = delete;

  // The first rank.
  /// Sends the order's header on the header stream; returns without waiting for it (unless on the CPU).
  void announce(const infer::StepOrder& order) override;
  /// Sends the step's inputs on the current (the step's) stream.
  void share_inputs(at::Tensor& inputs) override;
  /// Tells the other ranks to stop following, and waits until every header sent has arrived (a good end).
  void stop();
  /// Tells the other ranks that this one failed, without waiting for them.
  void abort();

  // The other ranks.
  /// The next order, waiting (on the host, for the header stream only) as long as the first rank is idle; the
  /// rank monitor ends a rank whose first rank died. Throws DistributedError when the control group fails.
  infer::StepOrder receive_order();
  /// The step's inputs, from the first rank, into `inputs` (the buffer the step reads), on the current stream.
  void receive_inputs(at::Tensor& inputs);

 private:
  /// One header's memory: pinned host values, the device copy the control group broadcasts, and the event after
  /// its broadcast on the header stream (its memory is free again once that has passed).
  struct Header;
  Header& next_header();
  /// Broadcasts `order` from the first rank through the next header.
  void send(const infer::StepOrder& order);

  dist::Communicator& control_;
  dist::Communicator& inputs_;
  int64_t max_requests_;
  capture::SideStream stream_;  // the headers' stream
  std::vector<std::unique_ptr<Header>> headers_;
  int64_t transfers_ = 0;  // headers sent or received so far
};

/// The first rank's engine calls: requests, cancellations and steps go to its engine, whose relay (`broadcast`)
/// sends each step it launches to the others; finish() and abort() tell them to stop.
class FirstRankEngineCalls final : public EngineCalls {
 public:
  /// Both not owned; they outlive this.
  FirstRankEngineCalls(infer::ServingEngine& engine, StepBroadcast& broadcast)
      : engine_(engine), broadcast_(broadcast) {}
  int64_t add_request(std::vector<int64_t> prompt, infer::RequestOptions options) override {
    return engine_.add_request(std::move(prompt), std::move(options));
  }
  void cancel(int64_t id) override { engine_.cancel(id); }
  infer::StepResult step() override { return engine_.step(); }
  void finish() override { broadcast_.stop(); }
  void abort() override { broadcast_.abort(); }

 private:
  infer::ServingEngine& engine_;
  StepBroadcast& broadcast_;
};

/// Another rank: has `engine` follow each step the first rank broadcasts, until it says stop (true) or that it
/// failed (false).
bool follow_steps(infer::ServingEngine& engine, StepBroadcast& broadcast);

}  // namespace graphed::serve
