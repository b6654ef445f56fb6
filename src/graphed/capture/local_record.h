// capture/local_record.h — the local implementation's record of one training iteration (research
// megatron-cudagraphs.md §2.5–2.8) and the buffer plan derived from it. The record lists, in execution
// order, the first forward call of every runner (its arguments and outputs as tensor ids: equal ids,
// the same tensor) and the first backward pass of every runner. The plan says, per graph, where each
// static input comes from — a fresh buffer, one buffer several graphs read (a mask, a rope table), or
// the static output of an earlier graph (no copy, §2.8.2) — and which grad-output buffer is the
// input-grad buffer of the one graph that consumed that output (zero-copy hand-off in backward).
// Pure bookkeeping: no tensors, no CUDA; the registry (capture/graph_registry.h) applies it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace graphed::capture {

/// The first forward call of one runner.
struct RecordedForward {
  int64_t runner = 0;           ///< runner id (the registry numbers runners as they appear)
  std::vector<int64_t> inputs;  ///< tensor id of each flattened argument
  std::vector<bool> input_requires_grad;
  std::vector<int64_t> outputs;  ///< tensor id of each output
  std::vector<bool> output_requires_grad;
};

/// One step of the recorded iteration: a runner's forward or its backward.
struct RecordEntry {
  bool forward = true;
  int64_t runner = 0;
};

class LocalRecord {
 public:
  /// Appends a runner's first forward. Throws std::logic_error (internal) if it was recorded before.
  void add_forward(RecordedForward call);
  /// Appends a runner's first backward; its forward must have been recorded, its backward not.
  void add_backward(int64_t runner);
  const std::vector<RecordEntry>& entries() const { return entries_; }
  const RecordedForward& forward_of(int64_t runner) const;
  bool has_backward(int64_t runner) const;
  bool empty() const { return entries_.empty(); }
  void clear();

 private:
  std::vector<RecordEntry> entries_;
  std::map<int64_t, RecordedForward> forwards_;
  std::set<int64_t> backwards_;
};

/// Where a graph's static input comes from.
enum class InputSource {
  kFresh,   ///< a buffer of its own; every replay copies the argument in
  kShared,  ///< one buffer for every graph that reads this tensor; each copies it in when it differs
  kOutput,  ///< the static output of an earlier graph: the caller passes exactly that buffer
};

struct PlannedInput {
  InputSource source = InputSource::kFresh;
  int64_t shared_buffer = -1;    ///< kShared: index into LocalBufferPlan::shared_buffer_users
  int64_t producer = -1;         ///< kOutput: the runner whose output it is
  int64_t producer_output = -1;  ///< kOutput: which of its outputs
};

/// The grad-output buffer of one output: the input-grad buffer of its one consuming graph, when that
/// graph's backward is recorded earlier (consumer >= 0), else a fresh buffer (consumer = -1).
struct PlannedGradOutput {
  int64_t consumer = -1;
  int64_t consumer_input = -1;
};

struct LocalBufferPlan {
  std::map<int64_t, std::vector<PlannedInput>> inputs;             ///< per runner, per argument
  std::map<int64_t, std::vector<PlannedGradOutput>> grad_outputs;  ///< per runner with a backward, per output
  std::vector<int64_t> shared_buffer_users;                        ///< how many arguments read each shared buffer
};

/// The plan for a record. A tensor produced by a recorded forward and read by a later one becomes
/// kOutput; one read by several graphs (and produced by none) kShared; anything else kFresh.
LocalBufferPlan plan_local_buffers(const LocalRecord& record);

}  // namespace graphed::capture
