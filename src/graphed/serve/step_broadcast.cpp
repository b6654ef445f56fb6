// serve/step_broadcast.cpp — see serve/step_broadcast.h. The first rank's headers go through a ring of buffers, so
// that it never waits for a header it just sent: with async scheduling it announces a step while the one before
// still runs, and a header's device buffer is written again only after its broadcast has passed.
#include "graphed/serve/step_broadcast.h"

#include <functional>

#include "graphed/runtime/device.h"
#include "graphed/util/error.h"

namespace graphed::serve {
namespace {

/// Header buffers: the first rank may have a header in flight for each step it launched ahead of its followers.
constexpr std::size_t kHeaderRing = 4;

}  // namespace

struct StepBroadcast::Header {
  Header(int64_t length, const at::Device& device)
      : host(runtime::pinned_host_tensor({length}, at::kLong, device)),
        values(at::zeros({length}, at::TensorOptions().dtype(at::kLong).device(device))),
        broadcast(device) {
    host.zero_();
  }
  at::Tensor host;                 // pinned int64 [length]: encoded or decoded here
  at::Tensor values;               // int64 [length] on the device: what the control group broadcasts
  runtime::StreamEvent broadcast;  // after its latest broadcast (and copy), on the header stream
};

StepBroadcast::StepBroadcast(dist::Communicator& control, dist::Communicator& inputs, int64_t max_requests,
                             const at::Device& device)
    : control_(control), inputs_(inputs), max_requests_(max_requests), stream_(device) {
  // Made on the header stream, which alone uses them, so that the allocator ties their memory to it.
  const capture::SideStream::Use use(stream_, capture::SideStream::Join::kNone);
  const int64_t length = infer::step_order_length(max_requests_);
  for (std::size_t i = 0; i < kHeaderRing; ++i) headers_.push_back(std::make_unique<Header>(length, device));
}

StepBroadcast::~StepBroadcast() = default;

StepBroadcast::Header& StepBroadcast::next_header() {
  return *headers_[static_cast<std::size_t>(transfers_++) % headers_.size()];
}

void StepBroadcast::send(const infer::StepOrder& order) {
  GRAPHED_INTERNAL_ASSERT(control_.rank() == 0, "rank ", control_.rank(), " of the ", control_.name(),
                          " group sent a step order");
  Header& header = next_header();
  header.broadcast.wait();  // its previous broadcast has passed: its host and device memory are free again
  infer::encode_step_order(order, max_requests_, header.host);
  // On the header stream alone: the broadcast waits for nothing the compute stream holds.
  const capture::SideStream::Use use(stream_, capture::SideStream::Join::kNone);
  header.values.copy_(header.host, /*non_blocking=*/true);
  control_.broadcast(header.values, 0);
  header.broadcast.record();
}

void StepBroadcast::announce(const infer::StepOrder& order) { send(order); }

void StepBroadcast::share_inputs(at::Tensor& inputs) {
  GRAPHED_INTERNAL_ASSERT(inputs_.rank() == 0, "rank ", inputs_.rank(), " of the ", inputs_.name(),
                          " group sent a step's inputs");
  inputs_.broadcast(inputs, 0);
}

void StepBroadcast::stop() {
  infer::StepOrder order;
  order.kind = infer::StepOrder::Kind::kStop;
  send(order);
  for (const auto& header : headers_) header->broadcast.wait();  // every follower has it: none waits any more
}

void StepBroadcast::abort() {
  infer::StepOrder order;
  order.kind = infer::StepOrder::Kind::kAbort;
  send(order);
}

infer::StepOrder StepBroadcast::receive_order() {
  GRAPHED_INTERNAL_ASSERT(control_.rank() != 0, "the first rank of the ", control_.name(),
                          " group waited for a step order");
  Header& header = next_header();
  {
    const capture::SideStream::Use use(stream_, capture::SideStream::Join::kNone);
    control_.broadcast(header.values, 0);
    header.host.copy_(header.values, /*non_blocking=*/true);
    header.broadcast.record();
  }
  header.broadcast.wait();  // the header's stream only: the steps queued before it run on meanwhile
  return infer::decode_step_order(header.host, max_requests_);
}

void StepBroadcast::receive_inputs(at::Tensor& inputs) {
  GRAPHED_INTERNAL_ASSERT(inputs_.rank() != 0, "the first rank of the ", inputs_.name(),
                          " group waited for a step's inputs");
  inputs_.broadcast(inputs, 0);
}

bool follow_steps(infer::ServingEngine& engine, StepBroadcast& broadcast) {
  const std::function<void(at::Tensor&)> receive_inputs = [&broadcast](at::Tensor& inputs) {
    broadcast.receive_inputs(inputs);
  };
  for (;;) {
    const infer::StepOrder order = broadcast.receive_order();
    switch (order.kind) {
      case infer::StepOrder::Kind::kStop: return true;
      case infer::StepOrder::Kind::kAbort: return false;
      case infer::StepOrder::Kind::kStep: engine.follow(order, receive_inputs); break;
    }
  }
}

}  // namespace graphed::serve
