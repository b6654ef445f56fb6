// grammar/detail/hash_index.h — HashIndex: an open-addressing index from 64-bit hashes to the ids of entries kept
// elsewhere (interned stacks, interned states, memoized transitions), so that interning costs no allocation per
// entry. Internal to grammar/; equality is the caller's (the index only narrows candidates by hash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace graphed::grammar::detail {

/// Mixes `value` into `seed` (the finalizer of splitmix64 over their sum), for hashes of small integer tuples.
inline std::uint64_t mix_hash(std::uint64_t seed, std::uint64_t value) {
  std::uint64_t mixed = seed + 0x9E3779B97F4A7C15ull + value;
  mixed = (mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9ull;
  mixed = (mixed ^ (mixed >> 27)) * 0x94D049BB133111EBull;
  return mixed ^ (mixed >> 31);
}

class HashIndex {
 public:
  /// The id stored under `hash` for which `same(id)` holds, or -1 when none is.
  template <typename Same>
  std::int32_t find(std::uint64_t hash, Same&& same) const {
    if (slots_.empty()) return -1;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t slot = hash & mask;; slot = (slot + 1) & mask) {
      const Slot& entry = slots_[slot];
      if (entry.id < 0) return -1;
      if (entry.hash == hash && same(entry.id)) return entry.id;
    }
  }

  /// Stores `id` under `hash`; the caller found no equal entry first.
  void insert(std::uint64_t hash, std::int32_t id) {
    if (2 * (count_ + 1) > slots_.size()) grow();  // at most half full, so probes stay short
    place(hash, id);
    ++count_;
  }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    std::int32_t id = -1;
  };

  void place(std::uint64_t hash, std::int32_t id) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t slot = hash & mask;
    while (slots_[slot].id >= 0) slot = (slot + 1) & mask;
    slots_[slot] = Slot{hash, id};
  }

  void grow() {
    std::vector<Slot> old(slots_.empty() ? 64 : 2 * slots_.size());
    old.swap(slots_);
    for (const Slot& entry : old) {
      if (entry.id >= 0) place(entry.hash, entry.id);
    }
  }

  std::vector<Slot> slots_;  // size a power of two, or empty
  std::size_t count_ = 0;
};

}  // namespace graphed::grammar::detail
