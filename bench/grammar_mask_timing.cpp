// bench/grammar_mask_timing.cpp — times grammar/'s token masks (no LibTorch): a synthetic 128,000-token
// vocabulary (the 256 bytes, then random printable strings of 2 to 8 bytes, a quarter with a leading blank), one
// JSON schema, and four prefixes (empty, inside a string, deeper in it, inside an integer); prints per prefix the
// allowed count, milliseconds per allowed_tokens() call (a cache miss costs the same) and microseconds per
// TokenMaskCache hit. Built by hand on any machine, for comparing mask searches (one command line):
//   g++ -O2 -std=c++17 -I src bench/grammar_mask_timing.cpp src/graphed/grammar/*.cpp
//       src/graphed/grammar/detail/*.cpp src/graphed/util/error.cpp -pthread -o grammar_mask_timing
//   ./grammar_mask_timing [REPEATS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "graphed/grammar/json_schema.h"
#include "graphed/grammar/token_mask.h"
#include "graphed/grammar/token_mask_cache.h"

namespace {

using graphed::grammar::Matcher;
using Clock = std::chrono::steady_clock;

std::vector<std::string> synthetic_vocabulary() {
  std::vector<std::string> vocabulary;
  for (int byte = 0; byte < 256; ++byte) vocabulary.emplace_back(1, static_cast<char>(byte));
  std::mt19937 random(1);
  std::uniform_int_distribution<int> length(2, 8), character(32, 126), quarter(0, 3);
  while (vocabulary.size() < 128000) {
    std::string token;
    const int count = length(random);
    if (quarter(random) == 0) token += ' ';
    for (int index = 0; index < count; ++index) {
      const int value = character(random);
      token += static_cast<char>(quarter(random) == 0 ? 'a' + value % 26 : value);
    }
    vocabulary.push_back(token);
  }
  return vocabulary;
}

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  const graphed::grammar::TokenTrie trie(synthetic_vocabulary());
  const graphed::grammar::Grammar grammar = graphed::grammar::compile_json_schema_text(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer"},)"
      R"("tags":{"type":"array","items":{"type":"string","enum":["a","b","c"]}}},"required":["name","age"]})");
  graphed::grammar::TokenMaskCache cache(grammar, trie);
  std::printf("vocabulary %d tokens, %zu trie nodes\n", trie.vocabulary_size(), trie.node_count());
  std::printf("%-26s %8s %14s %12s\n", "prefix", "allowed", "search ms", "hit us");
  std::vector<std::uint32_t> bitmask;
  std::vector<std::uint32_t> words(cache.word_count());
  for (const char* prefix : {"", "{\"name\":\"", "{\"name\":\"hello wor", "{\"name\":\"x\",\"age\":12"}) {
    Matcher matcher(grammar);
    matcher.accept_text(prefix);
    Clock::time_point start = Clock::now();
    std::int32_t allowed = 0;
    for (int repeat = 0; repeat < repeats; ++repeat) allowed = graphed::grammar::allowed_tokens(matcher, trie, bitmask);
    const double search = milliseconds_since(start) / repeats;
    cache.allowed(matcher, words.data());  // the miss
    start = Clock::now();
    for (int repeat = 0; repeat < 100 * repeats; ++repeat) cache.allowed(matcher, words.data());
    const double hit = milliseconds_since(start) * 1000 / (100 * repeats);
    std::printf("%-26s %8d %14.3f %12.2f\n", (std::string("'") + prefix + "'").c_str(), allowed, search, hit);
  }
  return 0;
}
