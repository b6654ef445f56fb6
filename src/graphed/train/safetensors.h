// train/safetensors.h — our own reader and writer of the safetensors format: an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the raw
// bytes. Writes are flushed and fsynced; reads check the whole header (lengths, dtypes, shapes, offsets,
// overlaps, metadata) before allocating anything. Model-level checks live in train/checkpoint.h.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

namespace graphed::train {

/// Writes the tensors (copied to the CPU, contiguous) and string metadata to path, fsynced.
/// Throws DataError when the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Throws CheckpointError "checkpoint file 'PATH' is corrupt: WHAT; fix: load an earlier checkpoint, or
/// start without --load" (shared with train/checkpoint.cpp).
[[noreturn]] void throw_corrupt_checkpoint(const std::string& path, const std::string& what);
/// A JSON value for a message: compact, invalid UTF-8 replaced, cut to 60 characters.
std::string json_excerpt(const nlohmann::json& value);

/// Reads every tensor of the file onto the CPU. Before allocating, checks that the header length fits
/// the file, the header is a JSON object, each entry has a known dtype, a shape of integers >= 0 whose
/// byte count does not overflow, data_offsets [begin, end] inside the data section spanning exactly
/// that byte count, that no two tensors overlap, and that __metadata__ maps strings to strings.
/// Throws CheckpointError naming the file, the tensor or field, and what was expected.
std::map<std::string, at::Tensor> read_safetensors(const std::string& path);

/// The safetensors name of a dtype ("F32", "I32", "BF16", ...); LibTorch's name for others.
std::string safetensors_dtype_name(at::ScalarType type);

}  // namespace graphed::train
