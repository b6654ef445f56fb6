// util/safetensors.h — our own reader and writer of the safetensors format: an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the raw
// bytes. Writes are flushed and fsynced; reads check the whole header (lengths, dtypes, shapes, offsets,
// overlaps, metadata) before allocating anything. Used by training checkpoints (train/checkpoint.h) and
// Hugging Face model folders (hf/hf_model.h); what a file must hold is their business, and so is the
// wording of the fix in a message (SafetensorsWording). Library graphed_tensor_io.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

namespace graphed {

/// How the reader's and writer's messages name the file and what to do about it; each user words its
/// own (training: "checkpoint file", "...; fix: pass another checkpoint to --load (an earlier iter_* folder of the same
/// --save folder, say)").
struct SafetensorsWording {
  std::string file = "safetensors file";  ///< what the file is, e.g. "checkpoint file"
  std::string unreadable_fix = "check that the file exists and can be read";       ///< cannot open or read it
  std::string corrupt_fix = "write the file again";                                ///< a malformed header or data
  std::string unwritable_fix = "check that the folder is writable and has space";  ///< cannot create it
  std::string write_failed_fix = "check the space left in the folder";             ///< a write or fsync failed
};

/// Writes the tensors (copied to the CPU, contiguous) and string metadata to path, fsynced.
/// Throws DataError "cannot write FILE 'PATH': REASON; fix: UNWRITABLE_FIX" (or "writing FILE 'PATH'
/// failed: ...; fix: WRITE_FAILED_FIX") when the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {}, const SafetensorsWording& wording = {});

/// Throws CheckpointError "FILE 'PATH' is corrupt: WHAT; fix: CORRUPT_FIX" (with wording's file and fix).
[[noreturn]] void throw_corrupt_safetensors(const std::string& path, const std::string& what,
                                            const SafetensorsWording& wording);
/// A JSON value for a message: compact, invalid UTF-8 replaced, cut to 60 characters.
std::string json_excerpt(const nlohmann::json& value);

/// Reads every tensor of the file onto the CPU. Before allocating, checks that the header length fits
/// the file, the header is a JSON object, each entry has a known dtype, a shape of integers >= 0 whose
/// byte count does not overflow, data_offsets [begin, end] inside the data section spanning exactly
/// that byte count, that no two tensors overlap, and that __metadata__ maps strings to strings.
/// Throws CheckpointError naming the file, the tensor or field, and what was expected: "cannot read
/// FILE 'PATH': REASON; fix: UNREADABLE_FIX", or the corrupt-file message of throw_corrupt_safetensors.
std::map<std::string, at::Tensor> read_safetensors(const std::string& path, const SafetensorsWording& wording = {});

/// A safetensors file read piecemeal: its header read and checked as read_safetensors checks it (no tensor data read),
/// then single tensors read on demand. Throws as read_safetensors does.
class SafetensorsFile {
 public:
  struct Entry {
    at::ScalarType type = at::kFloat;
    std::vector<int64_t> shape;
    uint64_t begin = 0;  ///< the bytes [begin, end) of the data section
    uint64_t end = 0;
  };
  explicit SafetensorsFile(std::string path, SafetensorsWording wording = {});
  const std::string& path() const { return path_; }
  /// Every tensor's entry by name.
  const std::map<std::string, Entry>& entries() const { return entries_; }
  /// Tensor `name` (one of entries()), read onto the CPU.
  at::Tensor read(const std::string& name) const;

 private:
  std::string path_;
  SafetensorsWording wording_;
  uint64_t data_start_ = 0;
  std::map<std::string, Entry> entries_;
};

/// The safetensors name of a dtype ("F32", "I32", "BF16", ...); LibTorch's name for others.
std::string safetensors_dtype_name(at::ScalarType type);

}  // namespace graphed
