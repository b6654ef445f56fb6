// serve/structured_output.cpp — see serve/structured_output.h. The engine asks a constraint for its mask, then tells
// it the token drawn, one call at a time per request; several requests' constraints may run on different threads,
// and they share only read-only things (the compiled grammar, the vocabulary table and trie).
#include "graphed/serve/structured_output.h"

#include <algorithm>
#include <cstring>
#include <list>
#include <utility>

namespace graphed::serve {

namespace {

/// Masks kept per grammar: 16 MiB at 128k ids; with the 32 grammars kept, at most half a GiB.
constexpr std::size_t kMasksPerGrammar = 1024;
constexpr std::size_t kGrammarsKept = 32;

}  // namespace

std::int32_t compute_allowed_tokens(CompiledGrammar& compiled, grammar::Matcher& matcher,
                                    const grammar::TokenTrie& trie, std::vector<std::uint32_t>& bitmask) {
  std::call_once(compiled.masks_made, [&] {
    compiled.masks = std::make_unique<grammar::TokenMaskCache>(compiled.grammar, trie,
                                                               grammar::TokenMaskCacheOptions{kMasksPerGrammar});
  });
  bitmask.resize(compiled.masks->word_count());
  return compiled.masks->allowed(matcher, bitmask.data());
}

std::shared_ptr<CompiledGrammar> shared_compiled_grammar(const std::string& key, const std::string& source,
                                                         const std::function<grammar::Grammar()>& compile) {
  static std::mutex mutex;
  static std::list<std::pair<std::string, std::shared_ptr<CompiledGrammar>>> latest;  // most recent first
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto kept = latest.begin(); kept != latest.end(); ++kept) {
      if (kept->first != key) continue;
      latest.splice(latest.begin(), latest, kept);
      return latest.front().second;
    }
  }
  auto compiled = std::make_shared<CompiledGrammar>(compile(), source);  // outside the lock: may take a while
  std::lock_guard<std::mutex> lock(mutex);
  latest.emplace_front(key, compiled);
  if (latest.size() > kGrammarsKept) latest.pop_back();
  return compiled;
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<CompiledGrammar> compiled,
                                     std::shared_ptr<const VocabularyTable> table,
                                     std::shared_ptr<const grammar::TokenTrie> trie, std::vector<int64_t> end_tokens)
    : compiled_(std::move(compiled)),
      table_(std::move(table)),
      trie_(std::move(trie)),
      end_tokens_(std::move(end_tokens)),
      matcher_(compiled_->grammar) {}

bool GrammarConstraint::is_end_token(std::int64_t token) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end();
}

std::int32_t GrammarConstraint::allow_end_tokens(std::uint32_t* words, std::int64_t word_count) const {
  std::int32_t set = 0;
  for (const int64_t token : end_tokens_) {
    if (token < 0 || token / 32 >= word_count) continue;
    std::uint32_t& word = words[token / 32];
    const std::uint32_t bit = std::uint32_t{1} << (token % 32);
    set += (word & bit) == 0;
    word |= bit;
  }
  return set;
}

void GrammarConstraint::allowed(std::uint32_t* words, std::int64_t word_count) {
  std::int32_t count = 0;
  if (!lost_) count = compute_allowed_tokens(*compiled_, matcher_, *trie_, bitmask_);
  // The engine's vocabulary may be padded past the tokenizer's ids (never allowed) or end before them.
  const auto copied = std::min<std::size_t>(static_cast<std::size_t>(word_count), lost_ ? 0 : bitmask_.size());
  if (copied > 0) std::memcpy(words, bitmask_.data(), copied * sizeof(std::uint32_t));
  std::memset(words + copied, 0, (static_cast<std::size_t>(word_count) - copied) * sizeof(std::uint32_t));
  if (copied < bitmask_.size()) {  // allowed ids past the engine's vocabulary do not count
    count = 0;
    for (std::size_t word = 0; word < copied; ++word) count += __builtin_popcount(words[word]);
  }
  if (lost_ || matcher_.can_finish()) count += allow_end_tokens(words, word_count);
  if (count > 0) return;
  // Nothing may follow: the request must still draw something, so it ends on an end token (or id 0).
  lost_ = true;
  if (allow_end_tokens(words, word_count) == 0 && word_count > 0) words[0] |= 1u;
}

void GrammarConstraint::accept(std::int64_t token) {
  if (lost_ || is_end_token(token)) return;
  if (!table_->grammar_usable(token) || !matcher_.accept_text(table_->bytes(token))) lost_ = true;
}

bool GrammarConstraint::finished() const { return lost_ || matcher_.accepts_nothing_more(); }

}  // namespace graphed::serve
