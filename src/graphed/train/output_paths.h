// train/output_paths.h — checks every place a run will write before its first iteration, so a bad
// --save or --metrics-file fails at once with the path and the reason, not after hours of training.
#pragma once

#include "graphed/config/train_config.h"

namespace graphed::train {

/// --save: an existing folder or one that can be created, and writable (a probe file is written and
/// removed), whose latest checkpoint is not past the iteration this run starts at (0, or --load's), so
/// that no save rewinds it. --metrics-file: its folder exists and the file can be opened for appending.
/// Throws DataError naming the flag, the path, the reason and the fix.
void check_output_paths(const config::TrainConfig& train);

}  // namespace graphed::train
