// infer/serving_engine_tokens.cpp — the serving engine's reading of drawn tokens (see infer/serving_engine.h): a
// launched step's tokens move its requests on, one token a row, or a verification's kept proposals and the token
// after them (speculative decoding), and a request ends on a stop token, its constraint's end or its token limit.
#include <algorithm>
#include <chrono>

#include "graphed/infer/serving_engine.h"

namespace graphed::infer {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

void ServingEngine::read_oldest(StepResult& result) {
  const LaunchedStep step = std::move(launched_.front());
  launched_.pop_front();
  TokenSlot& slot = *slots_[static_cast<std::size_t>(step.slot)];
  const auto waiting = Clock::now();
  slot.copied.wait();
  waited_seconds_ += std::chrono::duration<double>(Clock::now() - waiting).count();
  const double device_seconds = slot.timer.elapsed_ms() / 1000.0;
  stats_.device_seconds += device_seconds;
  result.timing.device_seconds += device_seconds;
  result.real = step.real;
  result.padded = step.padded;
  result.matched = step.matched;
  const int64_t* drawn = slot.tokens.data_ptr<int64_t>();
  for (std::size_t row = 0; row < step.rows.size(); ++row) {
    const LaunchedRow& launched = step.rows[row];
    if (!launched.samples || launched.proposal) continue;  // a proposal's row is read with its verification's first
    const auto found = requests_.find(launched.request);
    if (found == requests_.end()) continue;  // it ended (a stop token, cancelled) after this step was launched
    if (!launched.proposals.empty()) {
      take_verified(*found->second, step, row, drawn, result);
      continue;
    }
    --found->second->in_flight;
    take_token(*found->second, drawn[row], step, row, result);
  }
}

void ServingEngine::take_verified(Request& request, const LaunchedStep& step, std::size_t row, const int64_t* drawn,
                                  StepResult& result) {
  const std::vector<int64_t>& proposals = step.rows[row].proposals;
  const auto count = static_cast<int64_t>(proposals.size());
  // Each row drew the token after its input (greedy: the argmax; sampled: a draw of the target's distribution with
  // the request's noise for that token), so a proposal is kept while it equals what its row before drew.
  const std::vector<int64_t> target(drawn + row, drawn + row + count + 1);
  const Verdict verdict = verify_greedy(proposals, target);
  request.in_flight -= count + 1;
  request.speculation.verifying = false;
  scheduler_.speculator().record(request, count, verdict.accepted);
  // The refused proposals' positions are written again by later steps, and their blocks go back (unless the request
  // was preempted meanwhile and holds none).
  if (!request.blocks.empty()) {
    request.computed -= count - verdict.accepted;
    scheduler_.trim(request);
  }
  ++stats_.verifications;
  stats_.draft_tokens += count;
  for (int64_t i = 0; i <= verdict.accepted; ++i) {
    // Proposals kept count as they are taken: a stop token or the limit may end the request among them.
    if (i < verdict.accepted) ++stats_.accepted_tokens;
    if (!take_token(request, target[static_cast<std::size_t>(i)], step, row + static_cast<std::size_t>(i), result))
      return;
  }
}

bool ServingEngine::take_token(Request& request, int64_t token, const LaunchedStep& step, std::size_t row,
                               StepResult& result) {
  request.tokens.push_back(token);
  ++stats_.output_tokens;
  TokenEvent event{request.id, token, std::nullopt};
  if (step.logprobs && request.options.logprobs >= 0) {
    const TokenSlot& slot = *slots_[static_cast<std::size_t>(step.slot)];
    const int64_t top = inputs_.top_count();
    const float* values = slot.logprobs.data_ptr<float>() + static_cast<int64_t>(row) * (1 + top);
    const int64_t* ids = slot.top_ids.data_ptr<int64_t>() + static_cast<int64_t>(row) * top;
    TokenLogprobs logprobs{values[0], {}};
    for (int64_t k = 0; k < std::min(request.options.logprobs, top); ++k)
      logprobs.top.emplace_back(ids[k], values[1 + k]);
    event.logprobs = std::move(logprobs);
  }
  result.tokens.push_back(std::move(event));
  const auto& stops = request.options.stop_tokens;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
    finish(request, FinishReason::kStopToken, result);
    return false;
  }
  if (TokenConstraint* constraint = request.options.constraint.get()) {
    constraint->accept(token);
    if (constraint->finished()) {
      finish(request, FinishReason::kStopToken, result);
      return false;
    }
  }
  if (request.generated() >= request.options.max_new_tokens) {
    finish(request, FinishReason::kLength, result);
    return false;
  }
  return true;
}

}  // namespace graphed::infer
