// train/element_runs.h — checkpoint tensors stored in pieces: runs of a whole tensor's elements (flat, row-major
// order), each rank writing its own in parallel (the distributed optimizer's shards of the Adam moments), and a load
// reading only the pieces that overlap the runs it needs, from whichever rank wrote them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::train {

/// Elements [begin, begin + values.numel()) of the whole tensor `tensor`, flat in row-major order; `values` is 1-D.
struct ElementRun {
  std::string tensor;
  int64_t begin = 0;
  at::Tensor values;
};

/// Writes `runs` to the safetensors file at `path` (fsynced), each as "<tensor>@<begin>". Throws DataError when it
/// cannot be written.
void write_element_runs(const std::string& path, const std::vector<ElementRun>& runs);

/// The runs stored in every *.safetensors file of a folder, found from the files' headers (no data read).
class ElementRunIndex {
 public:
  /// Throws CheckpointError when a file is unreadable or corrupt, a stored name is not "<tensor>@<begin>" of a 1-D
  /// float32 tensor, or two stored runs of one tensor overlap.
  explicit ElementRunIndex(const std::string& folder);

  /// Checks that the stored runs cover every element of `wanted` (the runs to fill), without reading them; throws
  /// CheckpointError naming the tensor and the first range none covers.
  void check_covers(const std::vector<ElementRun>& wanted) const;
  /// Fills `wanted` from the stored runs that overlap them: each file is opened once and each of its runs read once,
  /// only where needed. Call check_covers first.
  void read_into(const std::vector<ElementRun>& wanted) const;
  /// The tensors stored, each with its stored element count.
  std::map<std::string, int64_t> tensors() const;

 private:
  struct Stored {
    std::size_t file = 0;  ///< into files_
    std::string name;      ///< in the file
    int64_t begin = 0;
    int64_t length = 0;
  };
  /// The stored runs of `tensor` overlapping [begin, end), in order.
  std::vector<const Stored*> overlapping(const std::string& tensor, int64_t begin, int64_t end) const;

  std::string folder_;
  std::vector<std::string> files_;
  std::map<std::string, std::vector<Stored>> runs_;  ///< by tensor, sorted by begin
};

}  // namespace graphed::train
