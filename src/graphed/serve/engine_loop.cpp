// serve/engine_loop.cpp — see serve/engine_loop.h. The loop's thread sleeps on a condition variable while
// the engine has nothing to do; a submission, a cancellation or shutdown wakes it. The engine is touched
// only on that thread; the lock guards the queue, the active map and the snapshot, never a step.
#include "graphed/serve/engine_loop.h"

#include <algorithm>
#include <string>
#include <utility>

#include "graphed/util/logging.h"
#include "graphed/util/text.h"

namespace graphed::serve {

std::optional<StreamEvent> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  StreamEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

void RequestStream::push(StreamEvent event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_one();  // one reader; no system call when it is not waiting
}

Histogram step_duration_histogram() {
  return Histogram({0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03,
                    0.05,   0.075, 0.1,   0.15,  0.25,  0.5,    1,    2.5,   5,    10});
}

EngineLoop::EngineLoop(infer::ServingEngine& engine, int64_t max_queued)
    : engine_(engine),
      own_calls_(std::make_unique<LocalEngineCalls>(engine)),
      calls_(*own_calls_),
      max_queued_(max_queued),
      thread_([this] { run(); }) {}

EngineLoop::EngineLoop(infer::ServingEngine& engine, EngineCalls& calls, int64_t max_queued)
    : engine_(engine), calls_(calls), max_queued_(max_queued), thread_([this] { run(); }) {}

EngineLoop::~EngineLoop() { shutdown(std::chrono::milliseconds(0)); }

std::shared_ptr<RequestStream> EngineLoop::submit(std::vector<int64_t> prompt, infer::RequestOptions options,
                                                  std::shared_ptr<RequestStream> same_prompt) {
  auto stream = std::make_shared<RequestStream>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Waiting requests are those beyond what the engine runs at once, queued here or in the engine.
    const auto held = static_cast<int64_t>(queue_.size() + active_.size());
    if (!accepting_ || held >= max_queued_ + engine_.options().max_requests) return nullptr;
    queue_.push_back({std::move(prompt), std::move(options), stream, std::move(same_prompt)});
  }
  wake_.notify_all();
  return stream;
}

void EngineLoop::shutdown(std::chrono::milliseconds grace) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    accepting_ = false;
    wake_.wait_for(lock, grace, [&] { return queue_.empty() && active_.empty(); });
    cancel_all_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

LoopSnapshot EngineLoop::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  LoopSnapshot snapshot = last_;
  const auto held = static_cast<int64_t>(queue_.size() + active_.size());
  snapshot.active = std::min(held, engine_.options().max_requests);
  snapshot.queued = held - snapshot.active;
  snapshot.accepting = accepting_;
  snapshot.failure = failure_;
  return snapshot;
}

void EngineLoop::admit_and_cancel() {
  for (; !queue_.empty(); queue_.pop_front()) {
    Submission& submission = queue_.front();
    // Queued before this one, so handed to the engine before it (the engine checks the prompts are the same).
    if (submission.same_prompt) submission.options.prompt_of = submission.same_prompt->engine_id;
    const int64_t id = calls_.add_request(std::move(submission.prompt), std::move(submission.options));
    submission.stream->engine_id = id;
    active_[id] = submission.stream;
  }
  for (const auto& [id, stream] : active_) {
    if (cancel_all_ || stream->cancel_requested()) calls_.cancel(id);
  }
}

void EngineLoop::deliver(const infer::StepResult& result, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (result.real.token_count > 0) last_.step_durations.observe(seconds);  // a step that had nothing to run is not one
  for (const auto& token : result.tokens) {
    const auto found = active_.find(token.request);
    if (found != active_.end()) found->second->push({token.token, std::nullopt, token.logprobs});
  }
  for (const auto& done : result.finished) {
    const auto found = active_.find(done.request);
    if (found == active_.end()) continue;
    found->second->push({std::nullopt, done});
    active_.erase(found);
  }
  last_.blocks_in_use = engine_.blocks_in_use();
  last_.stats = engine_.stats();
}

void EngineLoop::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || engine_.has_work(); });
      if (stopping_ && !engine_.has_work() && queue_.empty()) return;
      admit_and_cancel();
    }
    try {
      const auto started = std::chrono::steady_clock::now();
      const infer::StepResult result = calls_.step();
      deliver(result, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    } catch (const std::exception& error) {
      fail_all(error.what());
      return;
    }
    wake_.notify_all();  // shutdown() waits for the last request to finish
  }
}

void EngineLoop::fail_all(const std::string& what) {
  const std::string cause = without_library_tag(what);
  log_warn(std::string(kEngineFailure) + ": " + cause.substr(0, cause.find('\n')));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    accepting_ = false;
    failure_ = what;
    for (const auto& [id, stream] : active_) {
      stream->push({std::nullopt, infer::FinishedRequest{id, infer::FinishReason::kRejected, kEngineFailure, {}}});
    }
    active_.clear();
    for (auto& submission : queue_) {
      submission.stream->push(
          {std::nullopt, infer::FinishedRequest{0, infer::FinishReason::kRejected, kEngineFailure, {}}});
    }
    queue_.clear();
  }
  wake_.notify_all();
}

}  // namespace graphed::serve
