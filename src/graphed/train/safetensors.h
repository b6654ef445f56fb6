// train/safetensors.h — our own reader and writer of the safetensors format: an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the raw
// bytes. Writes are flushed and fsynced; reads check every offset against the file's size.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::train {

/// Writes the tensors (copied to the CPU, contiguous) and string metadata to path, fsynced.
/// Throws DataError when the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Reads every tensor of the file onto the CPU. Throws DataError naming the file when it is missing,
/// truncated, or its header is not valid safetensors.
std::map<std::string, at::Tensor> read_safetensors(const std::string& path);

}  // namespace graphed::train
