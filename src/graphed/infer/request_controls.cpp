// infer/request_controls.cpp — see infer/request_controls.h.
#include "graphed/infer/request_controls.h"

#include <algorithm>
#include <limits>

#include "graphed/runtime/device.h"
#include "graphed/util/error.h"

namespace graphed::infer {

RequestControls::RequestControls(const at::Device& device, int64_t max_requests) : device_(device) {
  for (int64_t slot = max_requests; slot >= 1; --slot) free_slots_.push_back(slot);
}

void RequestControls::put(at::Tensor row, const std::map<int64_t, float>& entries) const {
  if (entries.empty()) return;
  const auto count = static_cast<int64_t>(entries.size());
  at::Tensor ids = runtime::pinned_host_tensor({count}, at::kLong, device_);
  at::Tensor values = runtime::pinned_host_tensor({count}, at::kFloat, device_);
  int64_t index = 0;
  for (const auto& [token, value] : entries) {
    ids.data_ptr<int64_t>()[index] = token;
    values.data_ptr<float>()[index++] = value;
  }
  // The pinned buffers stay alive until their copies are done (LibTorch's caching host allocator).
  row.index_put_({ids.to(device_, /*non_blocking=*/true)},
                 values.to(device_, /*non_blocking=*/true).to(row.scalar_type()));
}

void RequestControls::prepare(const Schedule& schedule, StepInputs& inputs) {
  const LogitTables& tables = inputs.logit_tables();
  for (const ScheduledChunk& chunk : schedule.chunks) {
    Request& request = *chunk.request;
    const LogitControls& controls = request.options.controls;
    if (!controls.any()) continue;
    if (request.control_slot == 0) open(request, tables);
    const bool lifts = chunk.samples && controls.min_tokens > 0 && !request.min_tokens_reached &&
                       request.generated() + request.in_flight >= controls.min_tokens;
    if (!lifts) continue;
    // The stop tokens get back the bias the request gave them (0 if none).
    std::map<int64_t, float> bias;
    for (const int64_t stop : request.options.stop_tokens) {
      if (stop >= 0 && stop < tables.bias.size(1)) bias[stop] = 0.0F;
    }
    for (const auto& [token, value] : controls.logit_bias) {
      if (bias.count(token) > 0) bias[token] = static_cast<float>(value);
    }
    put(tables.bias.select(0, request.control_slot), bias);
    request.min_tokens_reached = true;
  }
}

void RequestControls::open(Request& request, const LogitTables& tables) {
  GRAPHED_INTERNAL_ASSERT(!free_slots_.empty(), "no logit control slot is free");
  const int64_t slot = free_slots_.back();
  free_slots_.pop_back();
  request.control_slot = slot;
  const LogitControls& controls = request.options.controls;
  at::Tensor bias = tables.bias.select(0, slot);
  at::Tensor counts = tables.counts.select(0, slot);
  at::Tensor seen = tables.prompt_seen.select(0, slot);
  bias.zero_();
  counts.zero_();
  seen.zero_();
  std::map<int64_t, float> biased;  // the last bias given a token wins, as in a JSON object
  for (const auto& [token, value] : controls.logit_bias) biased[token] = static_cast<float>(value);
  if (controls.min_tokens > 0 && !request.min_tokens_reached) {
    for (const int64_t stop : request.options.stop_tokens) {
      if (stop >= 0 && stop < bias.size(0)) biased[stop] = -std::numeric_limits<float>::infinity();
    }
  }
  put(bias, biased);
  if (controls.repetition_penalty != 1.0) {
    std::map<int64_t, float> prompt;
    for (int64_t i = 0; i < request.prompt_length; ++i) prompt[request.tokens[static_cast<std::size_t>(i)]] = 1.0F;
    put(seen, prompt);
  }
  std::map<int64_t, float> drawn;  // a request preempted before: what it drew so far
  for (auto token = request.tokens.begin() + request.prompt_length; token != request.tokens.end(); ++token) {
    drawn[*token] += 1.0F;
  }
  put(counts, drawn);
}

void RequestControls::release(Request& request) {
  if (request.control_slot == 0) return;
  free_slots_.push_back(request.control_slot);
  request.control_slot = 0;
}

void RequestControls::write_masks(const std::vector<TokenConstraint*>& constraints, StepInputs& inputs) {
  const auto requests = static_cast<int64_t>(constraints.size());
  at::Tensor host = inputs.host_masks(requests);
  const int64_t words = inputs.mask_words();
  auto* data = reinterpret_cast<std::uint32_t*>(host.data_ptr<int32_t>());
  std::vector<int64_t> constrained;
  for (int64_t row = 0; row < requests; ++row) {
    std::uint32_t* mask = data + row * words;
    if (constraints[static_cast<std::size_t>(row)] != nullptr) {
      constrained.push_back(row);
    } else {
      std::fill(mask, mask + words, ~std::uint32_t{0});
    }
  }
  // A mask can cost milliseconds the first time its grammar state is met: the requests' masks in parallel.
  if (!workers_) workers_ = std::make_unique<WorkerPool>(WorkerPool::workers_for_this_machine(8));
  workers_->run(static_cast<int64_t>(constrained.size()), [&](int64_t index) {
    const int64_t row = constrained[static_cast<std::size_t>(index)];
    constraints[static_cast<std::size_t>(row)]->allowed(data + row * words, words);
  });
  inputs.copy_masks(host);
}

}  // namespace graphed::infer
