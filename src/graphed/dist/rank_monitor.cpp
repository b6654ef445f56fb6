// dist/rank_monitor.cpp — see dist/rank_monitor.h.
#include "graphed/dist/rank_monitor.h"

#include <mutex>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace graphed::dist {
namespace {

constexpr auto kBeat = std::chrono::milliseconds(500);
const std::string kFailureKey = "monitor/failure";

std::string beat_key(int64_t rank) { return "monitor/beat/" + std::to_string(rank); }
std::string finished_key(int64_t rank) { return "monitor/finished/" + std::to_string(rank); }

/// The store is used from the main thread (notes, finish) and the watcher: one at a time.
std::mutex& store_mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

RankMonitor::RankMonitor(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t world_size,
                         std::chrono::milliseconds stall_limit, std::function<void(const std::string&)> on_failure)
    : store_(std::move(store)),
      rank_(rank),
      world_size_(world_size),
      stall_limit_(stall_limit),
      on_failure_(std::move(on_failure)) {
  thread_ = std::thread([this] { watch(); });
}

RankMonitor::~RankMonitor() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

bool RankMonitor::is_own_note(const std::string& note) const {
  return note.rfind("rank " + std::to_string(rank_) + ":", 0) == 0;
}

void RankMonitor::report_failure(const std::string& message) {
  std::lock_guard<std::mutex> lock(store_mutex());
  try {
    const std::string note = "rank " + std::to_string(rank_) + ": " + message;
    store_->set(kFailureKey, std::vector<uint8_t>(note.begin(), note.end()));
  } catch (const std::exception&) {
    // The store is gone too; the other ranks notice that on their own.
  }
}

std::optional<std::string> RankMonitor::failure_of_another_rank() {
  std::lock_guard<std::mutex> lock(store_mutex());
  try {
    if (!store_->check({kFailureKey})) return std::nullopt;
    const auto bytes = store_->get(kFailureKey);
    const std::string note(bytes.begin(), bytes.end());
    if (is_own_note(note)) return std::nullopt;
    return note;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void RankMonitor::finish() {
  std::lock_guard<std::mutex> lock(store_mutex());
  try {
    store_->add(finished_key(rank_), 1);
  } catch (const std::exception&) {
  }
}

void RankMonitor::wait_for_everyone() {
  const auto deadline = std::chrono::steady_clock::now() + stall_limit_;
  for (int64_t r = 0; r < world_size_; ++r) {
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(store_mutex());
        try {
          if (store_->add(finished_key(r), 0) > 0) break;
        } catch (const std::exception&) {
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void RankMonitor::watch() {
  std::vector<int64_t> last_count(static_cast<std::size_t>(world_size_), -1);
  std::vector<std::chrono::steady_clock::time_point> last_change(static_cast<std::size_t>(world_size_),
                                                                 std::chrono::steady_clock::now());
  while (!stopping_) {
    std::string failure;
    {
      std::lock_guard<std::mutex> lock(store_mutex());
      try {
        store_->add(beat_key(rank_), 1);
        if (store_->check({kFailureKey})) {
          const auto bytes = store_->get(kFailureKey);
          const std::string note(bytes.begin(), bytes.end());
          // This rank's own note: its main thread prints its error and exits; the note is for the others.
          if (!is_own_note(note)) failure = "stopping because " + note;
        }
        const auto now = std::chrono::steady_clock::now();
        for (int64_t r = 0; r < world_size_ && failure.empty(); ++r) {
          if (r == rank_ || store_->add(finished_key(r), 0) > 0) continue;
          const int64_t count = store_->add(beat_key(r), 0);
          auto index = static_cast<std::size_t>(r);
          if (count != last_count[index]) {
            last_count[index] = count;
            last_change[index] = now;
          } else if (now - last_change[index] > stall_limit_) {
            failure = "stopping because rank " + std::to_string(r) + " stopped answering (no sign of life for " +
                      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(stall_limit_).count()) +
                      " s): it has probably died; fix: read rank " + std::to_string(r) +
                      "'s own output (torchrun prints every rank's) for its error, and check that its machine is "
                      "still up";
          }
        }
      } catch (const std::exception&) {
        if (!stopping_)
          failure =
              "stopping because it lost the rendezvous store (hosted by rank 0 or torchrun): that rank has probably "
              "died; fix: read rank "
              "0's output (or torchrun's) for its error, and check that MASTER_ADDR's machine is still up";
      }
    }
    if (!failure.empty() && !stopping_) on_failure_(failure);
    std::this_thread::sleep_for(kBeat);
  }
}

}  // namespace graphed::dist
