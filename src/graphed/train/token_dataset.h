// train/token_dataset.h — training and validation tokens and deterministic batches. Sources:
//  * a token file (--data-path x.bin): llm.c's format (a 1024-byte header: magic 20240520 version 1
//    with uint16 ids, or magic 20240801 version 7 with uint32 ids; the header's width wins over
//    --token-dtype), else headerless nanoGPT-style ids (uint16 by default, --token-dtype uint32);
//  * text: a file, or a folder of .txt files (sorted, joined by newlines), through the byte-level
//    tokenizer (token = byte, so --vocab-size must be >= 256);
//  * synthetic tokens (--mock-data), generated per sample from the seed.
// --split divides the tokens into train / validation ranges. Sample i of a split starts at an offset
// drawn from a generator seeded by (seed, split, i): batches depend only on their index, so a
// resumed run sees exactly the data an uninterrupted one would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/config/model_config.h"
#include "graphed/config/train_config.h"

namespace graphed::train {

enum class Split { kTrain = 0, kValidation = 1 };

struct Batch {
  at::Tensor tokens;  ///< [batch, seq] int64, on the CPU
  at::Tensor labels;  ///< [batch, seq] int64: tokens shifted by one
};

class TokenDataset {
 public:
  /// Opens the data the config names (default_corpus when --data-path is unset and not --mock-data).
  /// Throws DataError naming the file and value for: a missing or unreadable path, an empty folder,
  /// a token file whose size is not a multiple of its token width, an llm.c header of an unknown
  /// version or whose token count disagrees with the file size, a token id >= --vocab-size, text
  /// with --vocab-size < 256, or a split too short for one --seq-length sample.
  static TokenDataset open(const config::TrainConfig& train, const config::ModelConfig& model,
                           const std::string& default_corpus, int64_t eval_iters);

  /// Samples [first, first + count) of a split, as one batch.
  Batch batch(Split split, int64_t first_sample, int64_t count) const;

  bool is_byte_level() const { return byte_level_; }
  /// "sotu.txt: 10,812,345 tokens (byte-level), train 10,488,000 / validation 324,000".
  const std::string& description() const { return description_; }
  /// How the tokens were stored: "llm.c .bin v1 (uint16), 1,000,000 tokens", "raw uint16 token ids
  /// (nanoGPT style)", "text, byte-level tokenizer" or "synthetic tokens".
  const std::string& format_description() const { return format_; }
  int64_t split_size(Split split) const;

  /// Byte-level tokenizer: token = byte, so its ids are 0..255 (--vocab-size may be larger).
  static constexpr int64_t kByteVocabulary = 256;
  static std::vector<int64_t> encode_bytes(const std::string& text);
  static std::string decode_bytes(const std::vector<int64_t>& tokens);

 private:
  TokenDataset() = default;
  uint64_t sample_offset(Split split, int64_t sample) const;

  std::vector<uint32_t> tokens_;
  int64_t split_begin_[2] = {0, 0};
  int64_t split_end_[2] = {0, 0};
  int64_t seq_length_ = 0;
  int64_t vocab_size_ = 0;
  int64_t seed_ = 0;
  bool mock_ = false;
  bool byte_level_ = false;
  std::string description_;
  std::string format_;
};

}  // namespace graphed::train
