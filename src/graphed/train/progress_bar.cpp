// train/progress_bar.cpp — see train/progress_bar.h.
#include "graphed/train/progress_bar.h"

#include <cstdio>
#include <string>

namespace graphed::train {

ProgressBar::ProgressBar(int64_t total, bool enabled)
    : total_(total), enabled_(enabled), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void ProgressBar::update(int64_t done) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (first_done_ < 0) {
    first_done_ = done;
    start_ = now;
  }
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done < total_) return;
  last_draw_ = now;
  const double fraction = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  const int width = 30;
  const int filled = static_cast<int>(fraction * width);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const int64_t progressed = done - first_done_;
  const double eta = progressed > 0 ? elapsed / static_cast<double>(progressed) * static_cast<double>(total_ - done) : 0.0;
  std::fprintf(stderr, "\r[%s%s] %lld/%lld  ETA %dm%02ds ", std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(width - filled), ' ').c_str(), static_cast<long long>(done),
               static_cast<long long>(total_), static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\r%*s\r", 60, "");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace graphed::train
