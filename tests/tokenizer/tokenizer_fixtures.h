// tests/tokenizer/tokenizer_fixtures.h — small hand-made tokenizers for the tokenizer tests, written as
// tokenizer.json files into a temporary folder: a byte-level vocabulary (the 256 byte code points,
// ids 0..255, plus a few merged words), the GPT-2 / Llama-3 / Qwen2 pipelines around it, and a
// Llama-2-style vocabulary with <0xXX> byte-fallback tokens.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graphed/tokenizer/byte_level.h"
#include "graphed/tokenizer/tokenizer.h"
#include "graphed/util/file_system.h"
#include "graphed/util/utf8.h"

namespace graphed::tokenizer::testing {

using nlohmann::json;

inline const std::string kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline const std::string kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline const std::string kMetaspace = "\xE2\x96\x81";  // ▁

/// A folder under $TMPDIR removed at the end of the test.
class TemporaryFolder {
 public:
  TemporaryFolder() : path_(make_temporary_directory("graphed-tokenizer-test")) { EXPECT_FALSE(path_.empty()); }
  ~TemporaryFolder() { remove_all(path_); }
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::string& path() const { return path_; }
  /// Writes a file in the folder and returns its path.
  std::string write(const std::string& name, const std::string& contents) const {
    const std::string file = join_path(path_, name);
    EXPECT_EQ(write_file_atomically(file, contents), 0) << file;
    return file;
  }

 private:
  std::string path_;
};

/// The byte-level form of plain text ("hello world" -> "helloĠworld").
inline std::string byte_level(const std::string& text) { return to_byte_level(text); }

/// A byte-level BPE vocabulary: the 256 byte code points (id = byte value), then the results of
/// `merges` (given as plain text pairs, converted to byte-level) from id 256 on.
struct ByteLevelVocabulary {
  json vocab = json::object();
  json merges = json::array();
  std::map<std::string, int64_t> ids;  // plain text -> id of the merged tokens

  explicit ByteLevelVocabulary(const std::vector<std::pair<std::string, std::string>>& plain_merges) {
    for (int byte = 0; byte < 256; ++byte) vocab[utf8_of(byte_to_unicode(static_cast<unsigned char>(byte)))] = byte;
    int64_t next = 256;
    for (const auto& [left, right] : plain_merges) {
      merges.push_back(byte_level(left) + " " + byte_level(right));
      const std::string merged = byte_level(left + right);
      if (!vocab.contains(merged)) {
        vocab[merged] = next;
        ids[left + right] = next++;
      }
    }
  }
};

/// Merges that make "hello", " world", "'m", " héllo" and "12" single tokens.
inline std::vector<std::pair<std::string, std::string>> word_merges() {
  return {{"h", "e"},         {"l", "l"},           {"he", "ll"},          {"hell", "o"}, {" ", "w"},       {"o", "r"},
          {" w", "or"},       {"l", "d"},           {" wor", "ld"},        {"'", "m"},    {"\xC3", "\xA9"}, {" ", "h"},
          {" h", "\xC3\xA9"}, {" h\xC3\xA9", "ll"}, {" h\xC3\xA9ll", "o"}, {"1", "2"}};
}

inline json bpe_model(const ByteLevelVocabulary& vocabulary, bool ignore_merges = false) {
  return json{{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", nullptr},
              {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr},
              {"fuse_unk", false},
              {"byte_fallback", false},
              {"ignore_merges", ignore_merges},
              {"vocab", vocabulary.vocab},
              {"merges", vocabulary.merges}};
}

inline json added_token(int64_t id, const std::string& content, bool special = true) {
  return json{{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
              {"rstrip", false}, {"normalized", !special}, {"special", special}};
}

inline json byte_level_step(bool add_prefix_space, bool use_regex) {
  return json{
      {"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

inline json split_step(const std::string& pattern) {
  return json{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
}

inline json tokenizer_document(json model, json pre_tokenizer, json added_tokens = json::array(),
                               json normalizer = nullptr, json post_processor = nullptr,
                               json decoder = json{{"type", "ByteLevel"}}) {
  return json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", std::move(added_tokens)},
              {"normalizer", std::move(normalizer)},
              {"pre_tokenizer", std::move(pre_tokenizer)},
              {"post_processor", std::move(post_processor)},
              {"decoder", std::move(decoder)},
              {"model", std::move(model)}};
}

/// GPT-2: ByteLevel(use_regex) pre-tokenizer, <|endoftext|> special.
inline json gpt2_document(const ByteLevelVocabulary& vocabulary) {
  return tokenizer_document(bpe_model(vocabulary), byte_level_step(false, true),
                            json::array({added_token(1000, "<|endoftext|>")}));
}

/// Llama-3 style: Split(pattern) + ByteLevel(use_regex=false), ignore_merges, BOS template.
inline json llama3_document(const ByteLevelVocabulary& vocabulary, const std::string& pattern = kLlama3Pattern) {
  const json post_processor{
      {"type", "Sequence"},
      {"processors",
       json::array({byte_level_step(true, true),
                    json{{"type", "TemplateProcessing"},
                         {"single", json::array({json{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                                                 json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"pair", json::array()},
                         {"special_tokens",
                          {{"<|begin_of_text|>",
                            {{"id", "<|begin_of_text|>"}, {"ids", {1000}}, {"tokens", {"<|begin_of_text|>"}}}}}}}})}};
  const json pre_tokenizer{{"type", "Sequence"},
                           {"pretokenizers", json::array({split_step(pattern), byte_level_step(false, false)})}};
  return tokenizer_document(bpe_model(vocabulary, true), pre_tokenizer,
                            json::array({added_token(1000, "<|begin_of_text|>"), added_token(1001, "<|end_of_text|>")}),
                            nullptr, post_processor);
}

/// A Llama-2-style vocabulary: <unk> <s> </s>, the 256 <0xXX> tokens (ids 3..258), "▁" and letters,
/// and merged words; normalizer Prepend(▁) + Replace(" " -> ▁), no pre-tokenizer, byte fallback,
/// template "<s> $A", decoder Replace + ByteFallback + Fuse + Strip.
inline json llama2_document() {
  json vocab{{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  char name[8];
  for (int byte = 0; byte < 256; ++byte) {
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    vocab[name] = 3 + byte;
  }
  int64_t next = 259;
  for (const std::string& piece : {kMetaspace, std::string("h"), std::string("e"), std::string("l"), std::string("o"),
                                   std::string("w"), std::string("r"), std::string("d"), std::string("\xC3\xA9")}) {
    vocab[piece] = next++;
  }
  json merges = json::array();
  for (const auto& [left, right] : std::vector<std::pair<std::string, std::string>>{{kMetaspace, "h"},
                                                                                    {"e", "l"},
                                                                                    {"l", "o"},
                                                                                    {kMetaspace + "h", "el"},
                                                                                    {kMetaspace + "hel", "lo"},
                                                                                    {kMetaspace, "w"},
                                                                                    {"o", "r"}}) {
    merges.push_back(json::array({left, right}));
    if (!vocab.contains(left + right)) vocab[left + right] = next++;
  }
  const json model{{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", "<unk>"},
                   {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr},
                   {"fuse_unk", true},
                   {"byte_fallback", true},
                   {"ignore_merges", false},
                   {"vocab", vocab},
                   {"merges", merges}};
  const json normalizer{
      {"type", "Sequence"},
      {"normalizers",
       json::array({json{{"type", "Prepend"}, {"prepend", kMetaspace}},
                    json{{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}}})}};
  const json post_processor{{"type", "TemplateProcessing"},
                            {"single", json::array({json{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                    json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  const json decoder{
      {"type", "Sequence"},
      {"decoders", json::array({json{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
                                json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}},
                                json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  return tokenizer_document(model, nullptr,
                            json::array({added_token(0, "<unk>"), added_token(1, "<s>"), added_token(2, "</s>")}),
                            normalizer, post_processor, decoder);
}

/// Writes the document as tokenizer.json in the folder and loads it.
inline std::unique_ptr<Tokenizer> load_document(const TemporaryFolder& folder, const json& document,
                                                const std::string& name = "tokenizer.json") {
  return load_tokenizer(folder.write(name, document.dump()));
}

/// The checked-in multilingual sample (accents, CJK, emoji, Cyrillic, runs of spaces and newlines).
inline std::string multilingual_sample() {
  std::string text;
  EXPECT_EQ(read_file(std::string(GRAPHED_SOURCE_DIR) + "/tests/tokenizer/data/multilingual_sample.txt", text), 0);
  return text;
}

}  // namespace graphed::tokenizer::testing
