// train/element_runs.cpp — see train/element_runs.h.
#include "graphed/train/element_runs.h"

#include <algorithm>
#include <memory>

#include <ATen/core/grad_mode.h>

#include "graphed/train/checkpoint.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/safetensors.h"

namespace graphed::train {
namespace {

/// What to do about a checkpoint whose runs are wrong: checkpoint_wording()'s fix for a corrupt file.
std::string fix() { return "; fix: " + checkpoint_wording().corrupt_fix; }

/// "<tensor>@<begin>" split; false when the name is not of that form.
bool parse_stored_name(const std::string& name, std::string& tensor, int64_t& begin) {
  const auto at = name.rfind('@');
  if (at == std::string::npos || at == 0 || at + 1 == name.size() || name.size() - at > 19) return false;
  const std::string digits = name.substr(at + 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return false;
  tensor = name.substr(0, at);
  begin = std::stoll(digits);
  return true;
}

std::string range(int64_t begin, int64_t end) { return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")"; }

}  // namespace

void write_element_runs(const std::string& path, const std::vector<ElementRun>& runs) {
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const ElementRun& run : runs) named.emplace_back(run.tensor + "@" + std::to_string(run.begin), run.values);
  write_safetensors(path, named, {{"format", "graphed-element-runs"}}, checkpoint_wording());
}

ElementRunIndex::ElementRunIndex(const std::string& folder) : folder_(folder) {
  for (const std::string& name : list_files(folder)) {
    if (extension_of(name) != ".safetensors") continue;
    const std::string path = join_path(folder, name);
    const SafetensorsFile file(path, checkpoint_wording());
    for (const auto& [stored, entry] : file.entries()) {
      std::string tensor;
      int64_t begin = 0;
      if (!parse_stored_name(stored, tensor, begin) || entry.type != at::kFloat || entry.shape.size() != 1) {
        throw CheckpointError("checkpoint file '" + path + "' holds '" + stored +
                              "', not a run of float32 elements named <tensor>@<first element>" + fix());
      }
      runs_[tensor].push_back({files_.size(), stored, begin, entry.shape[0]});
    }
    files_.push_back(path);
  }
  for (auto& [tensor, stored] : runs_) {
    std::sort(stored.begin(), stored.end(), [](const Stored& a, const Stored& b) { return a.begin < b.begin; });
    for (std::size_t i = 1; i < stored.size(); ++i) {
      const Stored& before = stored[i - 1];
      if (stored[i].begin < before.begin + before.length) {
        throw CheckpointError("the optimizer shards in '" + folder + "' hold elements " +
                              range(stored[i].begin, before.begin + before.length) + " of '" + tensor +
                              "' twice (in '" + files_[before.file] + "' and '" + files_[stored[i].file] + "')" +
                              fix());
      }
    }
  }
}

std::vector<const ElementRunIndex::Stored*> ElementRunIndex::overlapping(const std::string& tensor, int64_t begin,
                                                                         int64_t end) const {
  std::vector<const Stored*> found;
  const auto runs = runs_.find(tensor);
  if (runs == runs_.end()) return found;
  for (const Stored& stored : runs->second) {
    if (stored.begin < end && stored.begin + stored.length > begin) found.push_back(&stored);
  }
  return found;
}

void ElementRunIndex::check_covers(const std::vector<ElementRun>& wanted) const {
  for (const ElementRun& run : wanted) {
    const int64_t end = run.begin + run.values.numel();
    int64_t covered = run.begin;  // every element before this one is covered (the stored runs are in order)
    for (const Stored* stored : overlapping(run.tensor, run.begin, end)) {
      if (stored->begin > covered) break;
      covered = std::max(covered, stored->begin + stored->length);
    }
    if (covered < end) {
      throw CheckpointError("the optimizer shards in '" + folder_ + "' lack elements " +
                            range(covered, std::min(end, covered + 1)) + " of '" + run.tensor + "' (this run needs " +
                            range(run.begin, end) + ")" + fix());
    }
  }
}

void ElementRunIndex::read_into(const std::vector<ElementRun>& wanted) const {
  at::NoGradGuard no_grad;
  std::map<std::size_t, std::unique_ptr<SafetensorsFile>> opened;
  std::map<const Stored*, at::Tensor> read;
  for (const ElementRun& run : wanted) {
    const int64_t end = run.begin + run.values.numel();
    for (const Stored* stored : overlapping(run.tensor, run.begin, end)) {
      auto& tensor = read[stored];
      if (!tensor.defined()) {
        auto& file = opened[stored->file];
        if (!file) file = std::make_unique<SafetensorsFile>(files_[stored->file], checkpoint_wording());
        tensor = file->read(stored->name);
      }
      const int64_t first = std::max(run.begin, stored->begin);
      const int64_t last = std::min(end, stored->begin + stored->length);
      run.values.narrow(0, first - run.begin, last - first)
          .copy_(tensor.narrow(0, first - stored->begin, last - first));
    }
  }
}

std::map<std::string, int64_t> ElementRunIndex::tensors() const {
  std::map<std::string, int64_t> counts;
  for (const auto& [tensor, stored] : runs_) {
    for (const Stored& run : stored) counts[tensor] += run.length;
  }
  return counts;
}

}  // namespace graphed::train
