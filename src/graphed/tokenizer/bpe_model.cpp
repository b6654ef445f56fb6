// tokenizer/bpe_model.cpp — see tokenizer/bpe_model.h. The merge loop is HF tokenizers' (models/bpe/word.rs):
// a min-heap of candidate merges ordered by (rank, position) over a linked list of symbols, so a
// long word (SentencePiece-style tokenizers have no pre-tokenizer, the whole text is one word) costs
// O(n log n). For merge lists made by BPE training this gives the same result as GPT-2's
// encoder.py, which merges every occurrence of the lowest-ranked pair, then looks again.
#include "graphed/tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "graphed/util/error.h"
#include "graphed/util/utf8.h"

namespace graphed::tokenizer {
namespace {

constexpr std::size_t kCacheCapacity = 10000;    // words, as HF tokenizers' default
constexpr std::size_t kCacheMaxWordBytes = 256;  // longer words are not cached (HF: MAX_LENGTH)

uint64_t pair_key(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
}

std::string byte_token(unsigned char byte) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "<0x%02X>", byte);
  return buffer;
}

struct Symbol {
  int64_t id;
  long previous;  // index of the previous live symbol, -1 at the start
  long next;      // index of the next live symbol, -1 at the end
  bool removed;
};

struct Candidate {
  uint32_t rank;
  std::size_t position;
  int64_t merged_id;
  bool operator>(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : position > other.position;
  }
};

}  // namespace

BpeModel::BpeModel(std::unordered_map<std::string, int64_t> vocabulary, const std::vector<BpeMerge>& merges,
                   BpeModelOptions options, const std::string& source)
    : vocabulary_(std::move(vocabulary)), options_(std::move(options)) {
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto left_id = find_token(left);
    const auto right_id = find_token(right);
    const auto merged_id = find_token(left + right);
    const char* missing = !left_id     ? "its left part"
                          : !right_id  ? "its right part"
                          : !merged_id ? "the merged token"
                                       : nullptr;
    if (missing != nullptr) {
      throw DataError(source + ": merge " + std::to_string(rank) + " \"" + left + " " + right + "\": " + missing +
                      " is not in the vocabulary; fix: use the merges file that belongs to this vocabulary");
    }
    merges_[pair_key(*left_id, *right_id)] = MergeResult{static_cast<uint32_t>(rank), *merged_id};
  }
  if (options_.unknown_token) {
    unknown_id_ = find_token(*options_.unknown_token);
    if (!unknown_id_) {
      throw DataError(source + ": the unknown token \"" + *options_.unknown_token +
                      "\" (unk_token) is not in the vocabulary; fix: set unk_token to a vocabulary entry or null");
    }
  }
  if (options_.byte_fallback) {
    byte_token_ids_.assign(256, -1);
    for (unsigned byte = 0; byte < 256; ++byte) {
      if (const auto id = find_token(byte_token(static_cast<unsigned char>(byte)))) byte_token_ids_[byte] = *id;
    }
  }
}

std::optional<int64_t> BpeModel::find_token(std::string_view token) const {
  const auto found = vocabulary_.find(std::string(token));
  if (found == vocabulary_.end()) return std::nullopt;
  return found->second;
}

std::optional<BpeModel::MergeResult> BpeModel::find_merge(int64_t left, int64_t right) const {
  const auto found = merges_.find(pair_key(left, right));
  if (found == merges_.end()) return std::nullopt;
  return found->second;
}

std::vector<int64_t> BpeModel::initial_symbols(std::string_view word) const {
  std::vector<int64_t> symbols;
  symbols.reserve(word.size());
  bool unknown_pending = false;  // an unknown token not yet added (fuse_unk joins the next one to it)
  const CodePoints characters = decode_utf8(word, "the text");
  for (std::size_t index = 0; index < characters.size(); ++index) {
    const std::size_t begin = characters.byte_offsets[index];
    const std::string_view character = word.substr(begin, characters.byte_offsets[index + 1] - begin);
    if (const auto id = find_token(character)) {
      if (unknown_pending) symbols.push_back(*unknown_id_);
      unknown_pending = false;
      symbols.push_back(*id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all_bytes_known = true;
      for (const char byte : character)
        all_bytes_known = all_bytes_known && byte_token_ids_[static_cast<unsigned char>(byte)] >= 0;
      if (all_bytes_known) {
        // As HF tokenizers: a pending unknown token stays pending (it is added after these bytes).
        for (const char byte : character) symbols.push_back(byte_token_ids_[static_cast<unsigned char>(byte)]);
        continue;
      }
    }
    if (!unknown_id_) continue;  // no unk_token: the character is dropped, as in HF tokenizers
    if (unknown_pending && !options_.fuse_unknown) symbols.push_back(*unknown_id_);
    unknown_pending = true;
  }
  if (unknown_pending) symbols.push_back(*unknown_id_);
  return symbols;
}

void BpeModel::merge_symbols(std::vector<int64_t>& ids) const {
  std::vector<Symbol> symbols(ids.size());
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  for (std::size_t index = 0; index < ids.size(); ++index) {
    symbols[index] = Symbol{ids[index], static_cast<long>(index) - 1,
                            index + 1 < ids.size() ? static_cast<long>(index + 1) : -1, false};
    if (index + 1 < ids.size()) {
      if (const auto merge = find_merge(ids[index], ids[index + 1])) queue.push({merge->rank, index, merge->merged_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.position];
    if (left.removed || left.next < 0) continue;
    const Symbol right = symbols[static_cast<std::size_t>(left.next)];
    // A stale candidate: the pair at this position changed since it was queued.
    const auto current = find_merge(left.id, right.id);
    if (!current || current->merged_id != top.merged_id) continue;
    symbols[static_cast<std::size_t>(left.next)].removed = true;
    left.id = top.merged_id;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].previous = static_cast<long>(top.position);
    if (left.previous >= 0) {
      const std::size_t previous = static_cast<std::size_t>(left.previous);
      if (const auto merge = find_merge(symbols[previous].id, left.id))
        queue.push({merge->rank, previous, merge->merged_id});
    }
    if (left.next >= 0) {
      if (const auto merge = find_merge(left.id, symbols[static_cast<std::size_t>(left.next)].id)) {
        queue.push({merge->rank, top.position, merge->merged_id});
      }
    }
  }
  ids.clear();
  for (const Symbol& symbol : symbols) {
    if (!symbol.removed) ids.push_back(symbol.id);
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int64_t>& ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto id = find_token(word)) {
      ids.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() < kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto found = cache_.find(std::string(word));
    if (found != cache_.end()) {
      ids.insert(ids.end(), found->second.begin(), found->second.end());
      return;
    }
  }
  std::vector<int64_t> symbols = initial_symbols(word);
  merge_symbols(symbols);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::move(symbols));
  }
}

}  // namespace graphed::tokenizer
