// train/progress.cpp — see train/progress.h.
#include "graphed/train/progress.h"

#include <cstdio>

#include "graphed/util/text.h"

namespace graphed::train {

using Clock = std::chrono::steady_clock;

Progress::Progress(int64_t first, int64_t total, double tokens_per_iteration, EventLog& log, bool bar,
                   bool out_is_terminal, std::chrono::milliseconds heartbeat)
    : first_(first),
      total_(total),
      tokens_per_iteration_(tokens_per_iteration),
      log_(log),
      bar_(bar),
      heartbeat_(heartbeat),
      start_(Clock::now()),
      done_(first),
      last_draw_(start_),
      last_line_(start_) {
  if (!out_is_terminal) watcher_ = std::thread([this] { watch(); });
}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  clear_bar();
}

double Progress::elapsed_seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

double Progress::eta_seconds(int64_t done) const {
  const int64_t progressed = done - first_;
  return progressed > 0 ? elapsed_seconds() / static_cast<double>(progressed) * static_cast<double>(total_ - done)
                        : 0.0;
}

std::string Progress::duration(double seconds) {
  const auto whole = static_cast<long long>(seconds + 0.5);
  char text[32];
  if (whole < 60) {
    std::snprintf(text, sizeof(text), "%llds", whole);
  } else if (whole < 3600) {
    std::snprintf(text, sizeof(text), "%lldm%02llds", whole / 60, whole % 60);
  } else {
    std::snprintf(text, sizeof(text), "%lldh%02lldm", whole / 3600, (whole / 60) % 60);
  }
  return text;
}

void Progress::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const auto due = last_line_ + heartbeat_;
    if (Clock::now() < due) {
      wake_.wait_until(lock, due);
      continue;  // stopped, a line was printed meanwhile, or the quiet time is up: look again
    }
    const int64_t done = done_.load();
    const double elapsed = elapsed_seconds();
    const double tokens = static_cast<double>(done - first_) * tokens_per_iteration_;
    nlohmann::json fields{
        {"iteration", done}, {"train_iters", total_}, {"elapsed_s", elapsed}, {"tokens_seen", tokens}};
    std::string eta;
    if (done > first_) {
      fields["eta_s"] = eta_seconds(done);
      eta = ", ETA " + duration(eta_seconds(done));
    }
    log_.print("heartbeat", fields,
               "  ... iteration " + std::to_string(done) + "/" + std::to_string(total_) + ", " + duration(elapsed) +
                   " elapsed" + eta + ", " + group_thousands(tokens) + " tokens seen");
    last_line_ = Clock::now();
  }
}

void Progress::update(int64_t done) {
  done_.store(done);
  const auto now = Clock::now();
  if (!bar_ || (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done < total_)) return;
  last_draw_ = now;
  const double fraction = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  const int width = 30;
  const int filled = static_cast<int>(fraction * width);
  std::fprintf(stderr, "\r[%s%s] %lld/%lld  ETA %s ", std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(width - filled), ' ').c_str(), static_cast<long long>(done),
               static_cast<long long>(total_), duration(eta_seconds(done)).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::clear_bar() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r%*s\r", 60, "");
  std::fflush(stderr);
  drawn_ = false;
}

void Progress::print(const std::string& kind, const nlohmann::json& fields, const std::string& line) {
  clear_bar();
  std::lock_guard<std::mutex> lock(mutex_);
  log_.print(kind, fields, line);
  last_line_ = Clock::now();
}

}  // namespace graphed::train
