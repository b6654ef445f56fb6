// serve/histogram.h — a Prometheus histogram: fixed upper bounds, a count per bound, the sum and the count,
// rendered as the metric's _bucket (cumulative, with le labels, ending at +Inf), _sum and _count lines. Not
// thread-safe: its owner holds a lock (the server's metrics, or the engine loop's for step durations).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace graphed::serve {

class Histogram {
 public:
  /// `bounds`: the buckets' upper bounds, ascending (seconds for graphed's histograms).
  explicit Histogram(std::vector<double> bounds);
  /// Counts `value` in the first bucket whose bound is not below it: O(number of bounds).
  void observe(double value);
  /// The _bucket, _sum and _count lines of metric `name`.
  void render(const std::string& name, std::string& out) const;
  int64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bound, not cumulative; the last is +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

/// The text Prometheus's format uses for a number (up to 10 significant digits).
std::string metric_number(double value);

}  // namespace graphed::serve
