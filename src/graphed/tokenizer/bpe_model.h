// tokenizer/bpe_model.h — BpeModel: byte-pair encoding of one pre-token ("word") into ids, as HF
// tokenizers' BPE model does it: the word's characters looked up in the vocabulary (with byte
// fallback to <0xXX> tokens, or the unknown token), then merges applied lowest rank first (ties:
// leftmost), with a cache of recent words. ignore_merges (Llama-3): a word that is itself in the
// vocabulary is one token. No dropout, no continuing_subword_prefix / end_of_word_suffix.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace graphed::tokenizer {

struct BpeModelOptions {
  /// unk_token: replaces a character that is not in the vocabulary (and has no byte fallback). When
  /// unset such a character is dropped, as HF tokenizers does. Default unset.
  std::optional<std::string> unknown_token;
  /// fuse_unk: consecutive unknown characters become one unknown token. Default false.
  bool fuse_unknown = false;
  /// byte_fallback: a character not in the vocabulary becomes the <0xXX> tokens of its UTF-8 bytes
  /// when all of them are in the vocabulary (Llama-2). Default false.
  bool byte_fallback = false;
  /// ignore_merges: a word found whole in the vocabulary is one token (Llama-3). Default false.
  bool ignore_merges = false;
};

/// One merge rule: left + right -> left right (their concatenation), in rank order.
using BpeMerge = std::pair<std::string, std::string>;

class BpeModel {
 public:
  /// Checks every merge: both parts and their concatenation must be in the vocabulary (DataError
  /// naming `source`, the merge's rank and text otherwise); so must the unknown token. A pair listed
  /// twice keeps its later rank, as in HF tokenizers and GPT-2's encoder.py.
  BpeModel(std::unordered_map<std::string, int64_t> vocabulary, const std::vector<BpeMerge>& merges,
           BpeModelOptions options, const std::string& source);

  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  /// Appends the ids of one word (valid UTF-8) to `ids`. An empty word gives nothing.
  void encode_word(std::string_view word, std::vector<int64_t>& ids) const;

  /// The id of a vocabulary entry, if present.
  std::optional<int64_t> find_token(std::string_view token) const;
  const std::unordered_map<std::string, int64_t>& vocabulary() const { return vocabulary_; }
  const BpeModelOptions& options() const { return options_; }
  std::size_t merge_count() const { return merges_.size(); }

 private:
  struct MergeResult {
    uint32_t rank;
    int64_t merged_id;
  };
  /// The ids of the word's characters before merging (byte fallback and unknown tokens applied).
  std::vector<int64_t> initial_symbols(std::string_view word) const;
  /// Applies the merges to the symbols in place.
  void merge_symbols(std::vector<int64_t>& symbols) const;
  std::optional<MergeResult> find_merge(int64_t left, int64_t right) const;

  std::unordered_map<std::string, int64_t> vocabulary_;
  std::unordered_map<uint64_t, MergeResult> merges_;  // key: left id << 32 | right id
  BpeModelOptions options_;
  std::optional<int64_t> unknown_id_;
  std::vector<int64_t> byte_token_ids_;  // <0xXX> ids, -1 when missing (byte_fallback only)
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
};

}  // namespace graphed::tokenizer
