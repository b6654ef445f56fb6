// serve/engine_loop.h — the serving engine behind one thread, for a server whose HTTP threads must not
// touch the GPU: the loop's thread owns the engine and runs its steps; any thread submits a request and
// reads its tokens from a RequestStream as they are drawn, or cancels it (a client that hung up). A
// full queue refuses a submission (the server answers 429); shutdown() stops taking requests, lets the
// running ones finish within a grace period and cancels the rest. The loop's own work per step is one lock, one
// atomic read per running request (its cancellation), one push per stream that got a token, and one histogram
// count: no lock per stream beyond handing it its token, no polling, no sleeps.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "graphed/infer/serving_engine.h"
#include "graphed/serve/engine_calls.h"
#include "graphed/serve/histogram.h"

namespace graphed::serve {

/// One thing that happened to a request: a token drawn, or its end.
struct StreamEvent {
  std::optional<int64_t> token;                    ///< set for a token
  std::optional<infer::FinishedRequest> finished;  ///< set at the end (the last event)
  std::optional<infer::TokenLogprobs> logprobs;    ///< with a token, when the request asked for them
};

/// One request's events, written by the loop's thread, read by the thread that submitted it.
class RequestStream {
 public:
  /// The next event, waiting up to `timeout`; nullopt when none came in time.
  std::optional<StreamEvent> next(std::chrono::milliseconds timeout);
  /// Asks the loop to cancel the request (its blocks go back); its last event says cancelled.
  void cancel() { cancel_.store(true, std::memory_order_relaxed); }
  /// Asked by the loop of every running request before each step: an atomic, not the stream's lock.
  bool cancel_requested() const { return cancel_.load(std::memory_order_relaxed); }

  /// The loop's side.
  void push(StreamEvent event);
  /// The engine's id of the request, once the loop handed it to the engine (0 before); the loop's thread alone
  /// reads and writes it.
  int64_t engine_id = 0;

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
  std::atomic<bool> cancel_{false};
};

/// The buckets of the step-duration histogram: 0.5 ms to 10 s.
Histogram step_duration_histogram();

/// What the loop has at a moment (for /metrics and /health).
struct LoopSnapshot {
  int64_t queued = 0;  ///< submitted and waiting: beyond what the engine runs at once
  int64_t active = 0;  ///< running (at most the engine's max requests)
  int64_t blocks_in_use = 0;
  infer::EngineStats stats;
  /// Every step that ran, timed on the loop's thread around the engine's step (host clock, seconds): scheduling,
  /// the model, reading the drawn tokens; not handing them out.
  Histogram step_durations = step_duration_histogram();
  bool accepting = true;
  std::string failure;  ///< what stopped the engine (a step threw), empty while it runs
};

class EngineLoop {
 public:
  /// The message of every request ended by an engine failure.
  static constexpr const char* kEngineFailure = "the engine stopped after an internal error";

  /// Starts the thread. The engine must outlive the loop and be used by nothing else meanwhile.
  /// `max_queued`: how many requests may wait beyond the engine's max requests before submit refuses.
  EngineLoop(infer::ServingEngine& engine, int64_t max_queued);
  /// The same, with the engine's requests, cancellations and steps made through `calls` (which outlives the
  /// loop): a tensor-parallel group's first rank tells the others when to stop (serve/step_broadcast.h).
  EngineLoop(infer::ServingEngine& engine, EngineCalls& calls, int64_t max_queued);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  /// Queues a request; null when max_queued requests already wait or the loop no longer takes requests.
  /// `same_prompt`: the stream of a request submitted before with the same prompt, whose prompt this one reuses
  /// (infer::RequestOptions::prompt_of: the n choices of one prompt).
  std::shared_ptr<RequestStream> submit(std::vector<int64_t> prompt, infer::RequestOptions options,
                                        std::shared_ptr<RequestStream> same_prompt = nullptr);
  /// Stops taking requests, waits up to `grace` for the running and queued ones to finish, cancels
  /// what is left, and stops the thread. Idempotent.
  void shutdown(std::chrono::milliseconds grace);
  LoopSnapshot snapshot() const;
  /// Why the engine would refuse this request (too long for the context or the cache, an id outside the
  /// vocabulary), or nullopt; any thread may ask, so a server can answer 400 before it queues anything.
  std::optional<infer::Rejection> rejection(const std::vector<int64_t>& prompt,
                                            const infer::RequestOptions& options) const {
    return engine_.rejection(prompt, options);
  }
  /// The most positions one request may hold.
  int64_t max_sequence() const { return engine_.max_sequence(); }
  /// The most requests the loop holds at once: the engine's running ones and the queue's.
  int64_t capacity() const { return engine_.options().max_requests + max_queued_; }

 private:
  struct Submission {
    std::vector<int64_t> prompt;
    infer::RequestOptions options;
    std::shared_ptr<RequestStream> stream;
    std::shared_ptr<RequestStream> same_prompt;
  };
  void run();
  /// Hands queued requests to the engine and passes cancellations on (under the lock).
  void admit_and_cancel();
  /// Hands each token and end to its stream and counts the step's duration (`seconds`), under the lock.
  void deliver(const infer::StepResult& result, double seconds);
  /// A step threw: every request ends as rejected with kEngineFailure as its message (the exception's
  /// text goes to the log, never to a client), and the loop stops taking requests.
  void fail_all(const std::string& what);

  infer::ServingEngine& engine_;
  std::unique_ptr<EngineCalls> own_calls_;  // LocalEngineCalls, unless the builder gave calls
  EngineCalls& calls_;
  int64_t max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Submission> queue_;
  std::map<int64_t, std::shared_ptr<RequestStream>> active_;  // engine id -> stream
  bool accepting_ = true;
  bool stopping_ = false;
  bool cancel_all_ = false;
  LoopSnapshot last_;  // refreshed after every step
  std::string failure_;
  std::thread thread_;
};

}  // namespace graphed::serve
