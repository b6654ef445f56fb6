// util/statistics.h — the order statistics the benchmarks report: the median and a nearest-rank
// percentile, one definition each (bench, bench --decode and bench --serve share them).
#pragma once

#include <vector>

namespace graphed {

/// The middle of the sorted values, the mean of the two middle ones for an even count; 0 for none.
double median(std::vector<double> values);

/// The value at rank ceil(p x n) of the sorted values (p in (0, 1]); 0 for none.
double percentile(std::vector<double> values, double p);

}  // namespace graphed
