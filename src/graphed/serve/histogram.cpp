// serve/histogram.cpp — see serve/histogram.h.
#include "graphed/serve/histogram.h"

#include <sstream>
#include <utility>

namespace graphed::serve {

std::string metric_number(double value) {
  std::ostringstream text;
  text.precision(10);
  text << value;
  return text.str();
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::size_t index = 0;
  while (index < bounds_.size() && value > bounds_[index]) ++index;
  ++counts_[index];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  int64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + metric_number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + metric_number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

}  // namespace graphed::serve
