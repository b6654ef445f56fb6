// train/safetensors.cpp — see train/safetensors.h.
#include "graphed/train/safetensors.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::train {
namespace {

const std::vector<std::pair<std::string, at::ScalarType>>& dtype_names() {
  static const std::vector<std::pair<std::string, at::ScalarType>> names{
      {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16},
      {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
      {"U8", at::kByte},    {"BOOL", at::kBool}};
  return names;
}

std::string dtype_name(at::ScalarType type) {
  for (const auto& [name, scalar] : dtype_names()) {
    if (scalar == type) return name;
  }
  throw DataError(std::string("cannot store dtype ") + c10::toString(type) + " in safetensors");
}

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw DataError("checkpoint file '" + path + "' is corrupt: " + what +
                  "; fix: load an earlier checkpoint, or start without --load");
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<at::Tensor> contents;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(cpu.numel()) * cpu.element_size();
    header[name] = {{"dtype", dtype_name(cpu.scalar_type())}, {"shape", cpu.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contents.push_back(cpu);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();

  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    throw DataError("cannot write checkpoint file '" + path + "': " + std::strerror(errno) +
                    "; fix: check that the --save folder is writable and has space");
  }
  bool ok = std::fwrite(&length, sizeof(length), 1, file) == 1 && std::fwrite(text.data(), 1, text.size(), file) == text.size();
  for (const auto& tensor : contents) {
    const std::size_t bytes = static_cast<std::size_t>(tensor.numel()) * tensor.element_size();
    ok = ok && (bytes == 0 || std::fwrite(tensor.data_ptr(), 1, bytes, file) == bytes);
  }
  ok = ok && std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const int saved_errno = errno;
  ok = (std::fclose(file) == 0) && ok;
  if (!ok) {
    throw DataError("writing checkpoint file '" + path + "' failed: " + std::strerror(saved_errno) +
                    "; fix: check the space left in the --save folder");
  }
}

std::map<std::string, at::Tensor> read_safetensors(const std::string& path) {
  std::string bytes;
  if (const int error = read_file(path, bytes)) {
    throw DataError("cannot read checkpoint file '" + path + "': " + std::strerror(error) +
                    "; fix: pass the folder of a complete checkpoint to --load");
  }
  if (bytes.size() < 8) corrupt(path, "shorter than its 8-byte header length");
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  if (length > bytes.size() - 8) corrupt(path, "header length " + std::to_string(length) + " exceeds the file");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, length));
  } catch (const nlohmann::json::exception& error) {
    corrupt(path, std::string("header is not JSON (") + error.what() + ")");
  }
  const uint64_t data_start = 8 + length;
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      const std::string dtype = entry.at("dtype").get<std::string>();
      const auto shape = entry.at("shape").get<std::vector<int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      at::ScalarType type = at::kFloat;
      bool known = false;
      for (const auto& [candidate, scalar] : dtype_names()) {
        if (candidate == dtype) {
          type = scalar;
          known = true;
        }
      }
      if (!known) corrupt(path, "tensor '" + name + "' has unknown dtype " + dtype);
      at::Tensor tensor = at::empty(shape, at::TensorOptions().dtype(type));
      const uint64_t expected = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
      if (offsets.size() != 2 || offsets[1] < offsets[0] || offsets[1] - offsets[0] != expected ||
          data_start + offsets[1] > bytes.size()) {
        corrupt(path, "tensor '" + name + "' lies outside the file or has the wrong byte count (truncated?)");
      }
      if (expected > 0) std::memcpy(tensor.data_ptr(), bytes.data() + data_start + offsets[0], expected);
      tensors.emplace(name, tensor);
    } catch (const nlohmann::json::exception& error) {
      corrupt(path, "tensor '" + name + "' has a malformed entry (" + error.what() + ")");
    }
  }
  return tensors;
}

}  // namespace graphed::train
