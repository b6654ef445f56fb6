// grammar/token_mask_cache.cpp — lookups under one short lock, searches outside it, least-recently-used eviction.
#include "graphed/grammar/token_mask_cache.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "graphed/grammar/detail/hash_index.h"
#include "graphed/grammar/detail/mask_search.h"
#include "graphed/util/error.h"

namespace graphed::grammar {

TokenMaskCache::TokenMaskCache(const Grammar& grammar, const TokenTrie& trie, TokenMaskCacheOptions options)
    : grammar_(&grammar), trie_(&trie), options_(options), word_count_(bitmask_words(trie.vocabulary_size())) {}

std::int32_t TokenMaskCache::allowed(const Matcher& matcher, std::uint32_t* words) {
  GRAPHED_INTERNAL_ASSERT(&matcher.grammar() == grammar_,
                          "a token mask cache was asked about a matcher of another grammar object");
  Key key;
  matcher.write_state(key.state);
  key.hash = key.state.size();
  for (std::int32_t value : key.state) key.hash = detail::mix_hash(key.hash, static_cast<std::uint32_t>(value));

  MaskPointer mask;
  std::shared_future<MaskPointer> pending;
  std::promise<MaskPointer> promise;
  bool computes = false;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (auto found = masks_.find(key); found != masks_.end()) {
      recent_.splice(recent_.begin(), recent_, found->second.recent);
      mask = found->second.mask;
      ++counts_.hits;
    } else if (auto running = computing_.find(key); running != computing_.end()) {
      pending = running->second;
      ++counts_.waits;
    } else {
      pending = promise.get_future().share();
      computing_.emplace(key, pending);
      ++counts_.misses;
      computes = true;
    }
  }
  if (computes) {
    mask = compute(key, promise);
  } else if (!mask) {
    mask = pending.get();  // rethrows the computing thread's error
  }
  std::copy(mask->words.begin(), mask->words.end(), words);  // outside the lock: the mask is immutable
  return mask->allowed;
}

TokenMaskCache::MaskPointer TokenMaskCache::compute(const Key& key, std::promise<MaskPointer>& promise) {
  auto mask = std::make_shared<Mask>();
  try {
    mask->words.assign(word_count_, 0);
    mask->allowed = detail::search_mask(*grammar_, *trie_, key.state, mask->words.data());
  } catch (...) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      computing_.erase(key);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    computing_.erase(key);
    store(key, mask);
  }
  promise.set_value(mask);
  return mask;
}

void TokenMaskCache::store(const Key& key, const MaskPointer& mask) {
  if (options_.max_masks == 0) return;
  // A key is in computing_ until its search ends, and only its one searching thread stores it: never present.
  auto [entry, inserted] = masks_.emplace(key, Slot{mask, {}});
  GRAPHED_INTERNAL_ASSERT(inserted, "a token mask was computed twice at once");
  recent_.push_front(&entry->first);  // keys of an unordered_map stay where they are until erased
  entry->second.recent = recent_.begin();
  while (masks_.size() > options_.max_masks) {
    masks_.erase(masks_.find(*recent_.back()));  // by iterator: the key named lives in the erased node
    recent_.pop_back();
    ++counts_.evictions;
  }
}

TokenMaskCache::Counts TokenMaskCache::counts() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  Counts counts = counts_;
  counts.masks = masks_.size();
  return counts;
}

}  // namespace graphed::grammar
