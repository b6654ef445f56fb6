// util/safetensors.cpp — see util/safetensors.h.
#include "graphed/util/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/text.h"

namespace graphed {
namespace {

const std::vector<std::pair<std::string, at::ScalarType>>& dtype_names() {
  static const std::vector<std::pair<std::string, at::ScalarType>> names{
      {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
      {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool}};
  return names;
}

/// The safetensors name of a dtype we can store. Every tensor graphed saves has one: another is a bug.
std::string stored_dtype_name(at::ScalarType type) {
  for (const auto& [name, scalar] : dtype_names()) {
    if (scalar == type) return name;
  }
  GRAPHED_INTERNAL_ASSERT(false, "cannot store dtype ", c10::toString(type), " in safetensors");
  return "";
}

/// A malformed file, found while checking it; read_safetensors turns it into the user's message.
struct CorruptFile {
  std::string what;
};

[[noreturn]] void corrupt(const std::string& what) { throw CorruptFile{what}; }
std::string shown(const nlohmann::json& value) { return json_excerpt(value); }

/// One header entry, checked: its dtype, shape and [begin, end) byte range in the data section.
struct TensorEntry {
  std::string name;
  at::ScalarType type = at::kFloat;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

at::ScalarType parse_dtype(const std::string& name, const nlohmann::json& dtype) {
  if (dtype.is_string()) {
    for (const auto& [candidate, scalar] : dtype_names()) {
      if (candidate == dtype.get<std::string>()) return scalar;
    }
  }
  std::string known;
  for (const auto& [candidate, scalar] : dtype_names()) known += (known.empty() ? "" : ", ") + candidate;
  corrupt("tensor '" + name + "' has dtype " + shown(dtype) + ", expected one of " + known);
}

/// The shape, and its element count × element size in bytes, both checked against overflow.
std::vector<int64_t> parse_shape(const std::string& name, const nlohmann::json& shape, std::size_t element_size,
                                 uint64_t& bytes) {
  std::vector<int64_t> sizes;
  bool valid = shape.is_array();
  for (std::size_t i = 0; valid && i < shape.size(); ++i) {
    valid = shape[i].is_number_unsigned() && shape[i].get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
    if (valid) sizes.push_back(shape[i].get<int64_t>());
  }
  if (!valid) corrupt("tensor '" + name + "' has shape " + shown(shape) + ", expected an array of integers >= 0");
  int64_t count = 1;
  for (const int64_t size : sizes) {
    if (__builtin_mul_overflow(count, size, &count)) {
      corrupt("tensor '" + name + "' has shape " + shown(shape) + ", whose element count overflows int64");
    }
  }
  if (__builtin_mul_overflow(static_cast<uint64_t>(count), static_cast<uint64_t>(element_size), &bytes)) {
    corrupt("tensor '" + name + "' has shape " + shown(shape) + ", whose byte count overflows uint64");
  }
  return sizes;
}

/// Checks one entry against the data section's size (data_bytes); allocates nothing.
TensorEntry parse_entry(const std::string& name, const nlohmann::json& entry, uint64_t data_bytes) {
  if (!entry.is_object()) corrupt("tensor '" + name + "' has entry " + shown(entry) + ", expected an object");
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(field)) corrupt("tensor '" + name + "' has no field '" + field + "'");
  }
  TensorEntry result;
  result.name = name;
  result.type = parse_dtype(name, entry["dtype"]);
  uint64_t bytes = 0;
  result.shape = parse_shape(name, entry["shape"], c10::elementSize(result.type), bytes);
  const nlohmann::json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned() || offsets[0].get<uint64_t>() > offsets[1].get<uint64_t>()) {
    corrupt("tensor '" + name + "' has data_offsets " + shown(offsets) +
            ", expected [begin, end] with 0 <= begin <= end");
  }
  result.begin = offsets[0].get<uint64_t>();
  result.end = offsets[1].get<uint64_t>();
  if (result.end > data_bytes) {
    corrupt("tensor '" + name + "' has data_offsets " + shown(offsets) + ", beyond the data section of " +
            std::to_string(data_bytes) + " bytes (truncated?)");
  }
  if (result.end - result.begin != bytes) {
    corrupt("tensor '" + name + "' has data_offsets " + shown(offsets) + " (" +
            std::to_string(result.end - result.begin) + " bytes), but dtype " + entry["dtype"].get<std::string>() +
            " and shape " + shown(entry["shape"]) + " need " + std::to_string(bytes) + " bytes");
  }
  return result;
}

void check_metadata(const nlohmann::json& metadata) {
  bool valid = metadata.is_object();
  for (auto item = metadata.begin(); valid && item != metadata.end(); ++item) valid = item->is_string();
  if (!valid) corrupt("__metadata__ is " + shown(metadata) + ", expected an object of strings");
}

/// No two tensors may share bytes (entries sorted by begin here).
void check_no_overlap(std::vector<TensorEntry>& entries) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const TensorEntry* previous = nullptr;
  for (const auto& entry : entries) {
    if (entry.begin == entry.end) continue;
    if (previous != nullptr && entry.begin < previous->end) {
      corrupt("tensors '" + previous->name + "' [" + std::to_string(previous->begin) + ", " +
              std::to_string(previous->end) + ") and '" + entry.name + "' [" + std::to_string(entry.begin) + ", " +
              std::to_string(entry.end) + ") overlap in the data section");
    }
    previous = &entry;
  }
}

/// The header's length from the file's first 8 bytes (`size` bytes in all), checked against the file.
uint64_t header_length(const char* first_bytes, uint64_t size) {
  if (size < 8) corrupt("shorter than its 8-byte header length");
  uint64_t length = 0;
  std::memcpy(&length, first_bytes, 8);
  if (length > size - 8) {
    corrupt("header length " + std::to_string(length) + " exceeds the " + std::to_string(size - 8) + " bytes after it");
  }
  return length;
}

/// Parses and checks a header's text (the file holds `size` bytes); the data section starts at 8 + its length.
std::vector<TensorEntry> parse_header_text(const std::string& text, uint64_t size) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    corrupt("header is not JSON (syntax error at byte " + std::to_string(error.byte) + ")");
  } catch (const nlohmann::json::exception& error) {  // a number beyond a double (1e999)
    corrupt("header is not JSON (" + without_library_tag(error.what()) + ")");
  }
  if (!header.is_object()) {
    corrupt("header is a JSON " + std::string(header.type_name()) + ", expected an object");
  }
  const uint64_t data_start = 8 + text.size();
  std::vector<TensorEntry> entries;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      check_metadata(entry);
    } else {
      entries.push_back(parse_entry(name, entry, size - data_start));
    }
  }
  check_no_overlap(entries);
  return entries;
}

/// Parses and checks the whole header of the file's bytes; sets data_start (where the data section begins).
std::vector<TensorEntry> parse_header(const std::string& bytes, uint64_t& data_start) {
  const uint64_t length = header_length(bytes.data(), bytes.size());
  data_start = 8 + length;
  return parse_header_text(bytes.substr(8, length), bytes.size());
}

/// Runs `parse` and turns what it finds wrong with the file at `path` into the user's message.
template <typename Parse>
auto checked(const std::string& path, const SafetensorsWording& wording, const Parse& parse) {
  try {
    return parse();
  } catch (const CorruptFile& error) {
    throw_corrupt_safetensors(path, error.what, wording);
  } catch (const nlohmann::json::exception& error) {  // not expected: every access is type-checked
    throw_corrupt_safetensors(path, "header cannot be read (" + without_library_tag(error.what()) + ")", wording);
  }
}

}  // namespace

void throw_corrupt_safetensors(const std::string& path, const std::string& what, const SafetensorsWording& wording) {
  throw CheckpointError(wording.file + " '" + path + "' is corrupt: " + what + "; fix: " + wording.corrupt_fix);
}

std::string json_excerpt(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

std::string safetensors_dtype_name(at::ScalarType type) {
  for (const auto& [name, scalar] : dtype_names()) {
    if (scalar == type) return name;
  }
  return c10::toString(type);
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata, const SafetensorsWording& wording) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<at::Tensor> contents;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(cpu.numel()) * cpu.element_size();
    header[name] = {{"dtype", stored_dtype_name(cpu.scalar_type())},
                    {"shape", cpu.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contents.push_back(cpu);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();

  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    throw DataError("cannot write " + wording.file + " '" + path + "': " + std::strerror(errno) +
                    "; fix: " + wording.unwritable_fix);
  }
  bool ok = std::fwrite(&length, sizeof(length), 1, file) == 1 &&
            std::fwrite(text.data(), 1, text.size(), file) == text.size();
  for (const auto& tensor : contents) {
    const std::size_t bytes = static_cast<std::size_t>(tensor.numel()) * tensor.element_size();
    ok = ok && (bytes == 0 || std::fwrite(tensor.data_ptr(), 1, bytes, file) == bytes);
  }
  ok = ok && std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const int saved_errno = errno;
  ok = (std::fclose(file) == 0) && ok;
  if (!ok) {
    throw DataError("writing " + wording.file + " '" + path + "' failed: " + std::strerror(saved_errno) +
                    "; fix: " + wording.write_failed_fix);
  }
}

std::map<std::string, at::Tensor> read_safetensors(const std::string& path, const SafetensorsWording& wording) {
  std::string bytes;
  if (const int error = read_file(path, bytes)) {
    throw CheckpointError("cannot read " + wording.file + " '" + path + "': " + std::strerror(error) +
                          "; fix: " + wording.unreadable_fix);
  }
  uint64_t data_start = 0;
  const std::vector<TensorEntry> entries = checked(path, wording, [&] { return parse_header(bytes, data_start); });
  std::map<std::string, at::Tensor> tensors;
  for (const auto& entry : entries) {
    at::Tensor tensor = at::empty(entry.shape, at::TensorOptions().dtype(entry.type));
    if (entry.end > entry.begin) {
      std::memcpy(tensor.data_ptr(), bytes.data() + data_start + entry.begin, entry.end - entry.begin);
    }
    tensors.emplace(entry.name, tensor);
  }
  return tensors;
}

namespace {

[[noreturn]] void unreadable(const std::string& path, const SafetensorsWording& wording) {
  throw CheckpointError("cannot read " + wording.file + " '" + path + "': " + std::strerror(errno) +
                        "; fix: " + wording.unreadable_fix);
}

/// A read that got fewer bytes than the header promised: an I/O error, or a file cut short since it was opened.
[[noreturn]] void short_read(const std::string& path, const SafetensorsWording& wording, FILE* file) {
  if (std::ferror(file)) unreadable(path, wording);
  throw_corrupt_safetensors(path, "it ends before the bytes its header names (cut short while it was read?)", wording);
}

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  ///< the safetensors format's limit

}  // namespace

SafetensorsFile::SafetensorsFile(std::string path, SafetensorsWording wording)
    : path_(std::move(path)), wording_(std::move(wording)) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path_.c_str(), "rb"), &std::fclose);
  if (!file || std::fseek(file.get(), 0, SEEK_END) != 0) unreadable(path_, wording_);
  const long size = std::ftell(file.get());
  char first[8] = {};
  if (size < 0 || std::fseek(file.get(), 0, SEEK_SET) != 0) unreadable(path_, wording_);
  const std::size_t got = std::fread(first, 1, 8, file.get());
  if (got < 8 && std::ferror(file.get())) unreadable(path_, wording_);
  const auto bytes = static_cast<uint64_t>(size);
  const uint64_t length = checked(path_, wording_, [&] { return header_length(first, got < 8 ? got : bytes); });
  if (length > kMaxHeaderBytes) {
    throw_corrupt_safetensors(path_, "header length " + std::to_string(length) + " exceeds the format's 100 MB",
                              wording_);
  }
  std::string text(length, '\0');
  if (length > 0 && std::fread(text.data(), 1, length, file.get()) != length) short_read(path_, wording_, file.get());
  data_start_ = 8 + length;
  for (TensorEntry& entry : checked(path_, wording_, [&] { return parse_header_text(text, bytes); })) {
    entries_.emplace(entry.name, Entry{entry.type, std::move(entry.shape), entry.begin, entry.end});
  }
}

at::Tensor SafetensorsFile::read(const std::string& name) const {
  const Entry& entry = entries_.at(name);
  at::Tensor tensor = at::empty(entry.shape, at::TensorOptions().dtype(entry.type));
  if (entry.end == entry.begin) return tensor;
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path_.c_str(), "rb"), &std::fclose);
  const auto offset = static_cast<long>(data_start_ + entry.begin);
  const std::size_t bytes = entry.end - entry.begin;
  if (!file || std::fseek(file.get(), offset, SEEK_SET) != 0) unreadable(path_, wording_);
  if (std::fread(tensor.data_ptr(), 1, bytes, file.get()) != bytes) short_read(path_, wording_, file.get());
  return tensor;
}

}  // namespace graphed
