// tests/grammar/token_mask_cache_test.cpp — TokenMaskCache against allowed_tokens() at every state of seeded
// random walks over the corpus schemas and any_json_object(), both against a plain depth-first search that
// feeds the trie's bytes to the Matcher (the way masks were first computed); the state key across histories;
// eviction; several threads on one cache (a smoke test: no timing is asserted).
#include "graphed/grammar/token_mask_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "grammar/schema_corpus.h"
#include "grammar/synthetic_vocabulary.h"
#include "graphed/grammar/json_schema.h"

namespace graphed::grammar {
namespace {

// The reference: every trie path fed to the matcher byte by byte, rolled back after each subtree.
std::int32_t reference_visit(Matcher& matcher, const TokenTrie& trie, std::int32_t node,
                             std::vector<std::uint32_t>& bitmask) {
  std::int32_t allowed = 0;
  for (const auto& [byte, child] : trie.node(node).children) {
    const std::size_t mark = matcher.checkpoint();
    if (!matcher.accept(byte)) continue;
    for (std::int32_t token : trie.node(child).tokens) {
      bitmask[static_cast<std::size_t>(token) / 32] |= std::uint32_t{1} << (token % 32);
      ++allowed;
    }
    allowed += reference_visit(matcher, trie, child, bitmask);
    matcher.rollback(mark);
  }
  return allowed;
}

std::int32_t reference_mask(Matcher& matcher, const TokenTrie& trie, std::vector<std::uint32_t>& bitmask) {
  bitmask.assign(bitmask_words(trie.vocabulary_size()), 0);
  return reference_visit(matcher, trie, 0, bitmask);
}

// Walks tokens drawn uniformly from each mask until finishing is allowed and a coin says so, a dead end, or the
// cap; at each state the cache's mask must equal allowed_tokens()' and the reference's. Returns states checked.
int check_walks(const Grammar& grammar, const TokenTrie& trie, const std::vector<std::string>& vocabulary,
                TokenMaskCache& cache, unsigned seed, int walks, bool with_reference) {
  std::mt19937 random(seed);
  std::vector<std::uint32_t> cached(cache.word_count());
  std::vector<std::uint32_t> computed;
  std::vector<std::uint32_t> reference;
  int states = 0;
  for (int walk = 0; walk < walks; ++walk) {
    Matcher matcher(grammar);
    std::string document;
    for (;;) {
      const std::vector<Stack> before = matcher.stacks();
      const std::int32_t cached_count = cache.allowed(matcher, cached.data());
      const std::int32_t computed_count = allowed_tokens(matcher, trie, computed);
      EXPECT_EQ(matcher.stacks(), before) << "after: " << document;
      EXPECT_EQ(cached_count, computed_count) << "after: " << document;
      EXPECT_EQ(cached, computed) << "after: " << document;
      if (with_reference) {
        EXPECT_EQ(reference_mask(matcher, trie, reference), computed_count) << "after: " << document;
        EXPECT_EQ(reference, computed) << "after: " << document;
      }
      ++states;
      if (::testing::Test::HasFailure()) return states;
      if (computed_count == 0 || (matcher.can_finish() && random() % 3 == 0) || document.size() > 160) break;
      std::vector<std::int32_t> allowed;
      for (std::int32_t token = 0; token < trie.vocabulary_size(); ++token) {
        if (is_allowed(computed, token)) allowed.push_back(token);
      }
      const std::string& bytes = vocabulary[static_cast<std::size_t>(allowed[random() % allowed.size()])];
      EXPECT_TRUE(matcher.accept_text(bytes)) << document << " + " << bytes;
      document += bytes;
    }
  }
  return states;
}

TEST(TokenMaskCacheTest, EqualsAllowedTokensOnCorpusWalks) {
  const std::vector<std::string> vocabulary = testing::synthetic_vocabulary();
  const TokenTrie trie(vocabulary);
  for (const testing::SchemaCase& schema_case : testing::schema_corpus()) {
    SCOPED_TRACE(schema_case.name);
    const Grammar grammar = compile_json_schema_text(schema_case.schema);
    TokenMaskCache cache(grammar, trie);
    check_walks(grammar, trie, vocabulary, cache, 2024, 20, true);
    if (::testing::Test::HasFailure()) return;
    const TokenMaskCache::Counts counts = cache.counts();
    EXPECT_GT(counts.hits, 0) << "every walk starts in one state";
    EXPECT_EQ(counts.masks, static_cast<std::size_t>(counts.misses));
  }
}

TEST(TokenMaskCacheTest, EqualsAllowedTokensForAnyJsonObject) {
  const std::vector<std::string> vocabulary = testing::synthetic_vocabulary();
  const TokenTrie trie(vocabulary);
  const Grammar grammar = any_json_object();
  TokenMaskCache cache(grammar, trie);
  check_walks(grammar, trie, vocabulary, cache, 99, 40, true);
}

TEST(TokenMaskCacheTest, EvictsBeyondItsBudgetAndStaysExact) {
  const std::vector<std::string> vocabulary = testing::synthetic_vocabulary();
  const TokenTrie trie(vocabulary);
  const Grammar grammar = any_json_object();
  TokenMaskCache cache(grammar, trie, TokenMaskCacheOptions{3});
  check_walks(grammar, trie, vocabulary, cache, 5, 10, false);
  const TokenMaskCache::Counts counts = cache.counts();
  EXPECT_LE(counts.masks, 3u);
  EXPECT_GT(counts.evictions, 0);
  EXPECT_EQ(counts.misses - counts.evictions, static_cast<std::int64_t>(counts.masks));
}

TEST(TokenMaskCacheTest, KeepingNoMasksStillAnswers) {
  const std::vector<std::string> vocabulary = testing::synthetic_vocabulary();
  const TokenTrie trie(vocabulary);
  const Grammar grammar = compile_json_schema_text(testing::schema_corpus().front().schema);
  TokenMaskCache cache(grammar, trie, TokenMaskCacheOptions{0});
  check_walks(grammar, trie, vocabulary, cache, 8, 3, false);
  EXPECT_EQ(cache.counts().masks, 0u);
  EXPECT_EQ(cache.counts().hits, 0);
}

// Two histories that end in the same set of stacks write one key, and so share one mask; a different set does not.
TEST(TokenMaskCacheTest, StateKeyDependsOnTheStacksAlone) {
  Grammar grammar;
  const Element letter = grammar.choice({literal("a"), literal("b")});
  grammar.set_root(grammar.add_rule("root", {{letter, Element::of_byte('c')}, {literal("ad")}}));
  const std::vector<std::string> vocabulary = {"a", "b", "c", "d", "ac", "bc"};
  const TokenTrie trie(vocabulary);
  TokenMaskCache cache(grammar, trie);
  Matcher first(grammar);
  Matcher second(grammar);
  ASSERT_TRUE(second.accept('a'));  // gives the stacks of the "a" branch their ids first
  second.reset();
  ASSERT_TRUE(first.accept('b'));
  ASSERT_TRUE(second.accept('b'));
  std::vector<std::int32_t> first_key;
  std::vector<std::int32_t> second_key;
  first.write_state(first_key);
  second.write_state(second_key);
  EXPECT_EQ(first_key, second_key);
  std::uint32_t word = 0;
  EXPECT_EQ(cache.allowed(first, &word), 1);
  EXPECT_EQ(word, 1u << 2);
  EXPECT_EQ(cache.allowed(second, &word), 1);
  EXPECT_EQ(cache.counts().hits, 1);

  Matcher third(grammar);
  ASSERT_TRUE(third.accept('a'));  // "c" or "d" may follow: another state
  std::vector<std::int32_t> third_key;
  third.write_state(third_key);
  EXPECT_NE(third_key, first_key);
  EXPECT_EQ(cache.allowed(third, &word), 2);
  EXPECT_EQ(word, (1u << 2) | (1u << 3));
  EXPECT_EQ(cache.counts().misses, 2);
}

TEST(TokenMaskCacheTest, MatcherOfAnotherGrammarIsAnInternalError) {
  const Grammar grammar = any_json_object();
  const Grammar other = any_json_object();
  const TokenTrie trie(std::vector<std::string>{"{", "}"});
  TokenMaskCache cache(grammar, trie);
  const Matcher matcher(other);
  std::uint32_t word = 0;
  EXPECT_THROW(cache.allowed(matcher, &word), std::logic_error);
}

TEST(TokenMaskCacheTest, ThreadsShareOneCache) {
  const std::vector<std::string> vocabulary = testing::synthetic_vocabulary();
  const TokenTrie trie(vocabulary);
  const Grammar grammar = compile_json_schema_text(testing::schema_corpus()[3].schema);  // nested
  TokenMaskCache cache(grammar, trie, TokenMaskCacheOptions{16});  // small: evictions race with lookups
  std::atomic<int> failures{0};
  std::atomic<int> states{0};
  std::vector<std::thread> threads;
  for (unsigned thread = 0; thread < 4; ++thread) {
    threads.emplace_back([&, thread] {
      std::mt19937 random(100 + thread);
      std::vector<std::uint32_t> cached(cache.word_count());
      std::vector<std::uint32_t> computed;
      for (int walk = 0; walk < 15; ++walk) {
        Matcher matcher(grammar);
        for (int step = 0; step < 40; ++step) {
          const std::int32_t count = cache.allowed(matcher, cached.data());
          failures += count != allowed_tokens(matcher, trie, computed) || cached != computed;
          ++states;
          if (count == 0 || (matcher.can_finish() && random() % 3 == 0)) break;
          std::vector<std::int32_t> allowed;
          for (std::int32_t token = 0; token < trie.vocabulary_size(); ++token) {
            if (is_allowed(computed, token)) allowed.push_back(token);
          }
          if (!matcher.accept_text(vocabulary[static_cast<std::size_t>(allowed[random() % allowed.size()])])) {
            ++failures;
            break;
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  const TokenMaskCache::Counts counts = cache.counts();
  EXPECT_EQ(counts.hits + counts.misses + counts.waits, states.load());
  EXPECT_LE(counts.masks, 16u);
}

}  // namespace
}  // namespace graphed::grammar
