// grammar/token_mask_cache.h — TokenMaskCache: the token masks of one grammar over one vocabulary, memoized by
// the matcher's state (its set of stacks, compared whole) and shared by every request that runs the grammar, on
// any thread. Torch-free; applying a mask to logits, and allowing the end token, is the caller's business.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "graphed/grammar/matcher.h"
#include "graphed/grammar/token_mask.h"

namespace graphed::grammar {

struct TokenMaskCacheOptions {
  /// The most masks kept; 0 keeps none (every mask is computed). A mask takes bitmask_words(vocabulary) x 4
  /// bytes plus its state's key: 16 KiB for a 128k vocabulary, so the default holds about 64 MiB.
  std::size_t max_masks = 4096;
};

/// Many requests of one schema pass through the same few states (inside a string, after a key, ...), so most
/// masks are asked for again: a hit copies the mask; a miss computes it as allowed_tokens() does, outside the
/// lock, and a second thread asking for a mask being computed waits for it rather than computing it again.
/// At most TokenMaskCacheOptions::max_masks masks are kept, the least recently used going first. Thread-safe.
class TokenMaskCache {
 public:
  /// What the cache did since it was made.
  struct Counts {
    std::int64_t hits = 0;       // masks copied from the cache
    std::int64_t misses = 0;     // masks computed
    std::int64_t waits = 0;      // masks another thread was computing, waited for
    std::int64_t evictions = 0;  // masks dropped to stay within max_masks
    std::size_t masks = 0;       // masks held now
  };

  /// grammar, trie: not owned; they outlive the cache.
  TokenMaskCache(const Grammar& grammar, const TokenTrie& trie, TokenMaskCacheOptions options = {});

  /// Writes the tokens allowed from the matcher's current state into `words` (word_count() words; every word
  /// is written), exactly as allowed_tokens() would, and returns their count. The matcher must run this cache's
  /// grammar object (an internal error otherwise); it is not changed. Rethrows the search's internal errors.
  std::int32_t allowed(const Matcher& matcher, std::uint32_t* words);

  /// bitmask_words(trie.vocabulary_size()).
  std::size_t word_count() const { return word_count_; }
  Counts counts() const;

 private:
  struct Mask {
    std::vector<std::uint32_t> words;
    std::int32_t allowed = 0;
  };
  using MaskPointer = std::shared_ptr<const Mask>;

  struct Key {
    std::vector<std::int32_t> state;  // Matcher::write_state
    std::uint64_t hash = 0;
    bool operator==(const Key& other) const { return hash == other.hash && state == other.state; }
  };
  struct KeyHash {
    std::size_t operator()(const Key& key) const { return static_cast<std::size_t>(key.hash); }
  };

  struct Slot {
    MaskPointer mask;
    std::list<const Key*>::iterator recent;  // its place in recent_
  };

  MaskPointer compute(const Key& key, std::promise<MaskPointer>& promise);
  void store(const Key& key, const MaskPointer& mask);  // under the lock

  const Grammar* grammar_;  // not owned
  const TokenTrie* trie_;   // not owned
  TokenMaskCacheOptions options_;
  std::size_t word_count_;

  mutable std::mutex mutex_;  // guards everything below
  std::unordered_map<Key, Slot, KeyHash> masks_;
  std::list<const Key*> recent_;  // keys of masks_, the most recently used first
  std::unordered_map<Key, std::shared_future<MaskPointer>, KeyHash> computing_;
  Counts counts_;
};

}  // namespace graphed::grammar
