// tests/tokenizer/tokenizer_files_test.cpp — load_tokenizer: the accepted paths (tokenizer.json, folders
// with tokenizer.json / vocab.json + merges.txt / encoder.json + vocab.bpe, "bytes"), both merge
// formats, tokenizer_config.json's BOS/EOS, and every refusal naming the file, field and value.
#include "graphed/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include "error_text.h"
#include "graphed/tokenizer/split_pattern.h"
#include "tokenizer_fixtures.h"

namespace graphed::tokenizer {
namespace {

using graphed::testing::error_text;
using namespace graphed::tokenizer::testing;  // NOLINT: fixtures
using Ids = std::vector<int64_t>;

const std::string kAccepted =
    "a tokenizer.json file; a folder holding tokenizer.json, vocab.json + merges.txt, or encoder.json + vocab.bpe; "
    "or the word bytes (graphed's byte tokenizer)";

/// The message of loading `document` as tokenizer.json, with the folder's path replaced by DIR.
std::string load_error(const json& document) {
  TemporaryFolder folder;
  std::string message = error_text<DataError>([&] { load_document(folder, document); });
  for (std::size_t at = message.find(folder.path()); at != std::string::npos; at = message.find(folder.path())) {
    message.replace(at, folder.path().size(), "DIR");
  }
  return message;
}

json llama3() { return llama3_document(ByteLevelVocabulary(word_merges())); }

TEST(TokenizerFilesTest, BytesIsGraphedsByteTokenizer) {
  const auto tokenizer = load_tokenizer("bytes");
  EXPECT_EQ(tokenizer->encode("h\xC3\xA9"), (Ids{104, 195, 169}));
  EXPECT_EQ(tokenizer->decode({104, 195}), "h\xEF\xBF\xBD");
  EXPECT_EQ(tokenizer->vocab_size(), 256);
  EXPECT_EQ(tokenizer->token_text(65), "A");
  EXPECT_EQ(tokenizer->token_text(10), "<0x0A>");
  EXPECT_EQ(tokenizer->eos_id(), std::nullopt);
  EXPECT_EQ(error_text<DataError>([&] {
              tokenizer->decode({104, 256});
            }),
            "token id 256 is outside the vocabulary (256 ids: 0..255); fix: pass ids this tokenizer produced");
}

TEST(TokenizerFilesTest, Gpt2VocabFoldersGiveTheSameIdsAsTheTokenizerJson) {
  const ByteLevelVocabulary vocabulary(word_merges());
  json vocab = vocabulary.vocab;
  vocab["<|endoftext|>"] = 1000;
  std::string merges = "#version: 0.2\n";
  for (const auto& merge : vocabulary.merges) merges += merge.get<std::string>() + "\n";
  TemporaryFolder gpt2;
  gpt2.write("vocab.json", vocab.dump());
  gpt2.write("merges.txt", merges);
  TemporaryFolder npm;
  npm.write("encoder.json", vocab.dump());
  npm.write("vocab.bpe", merges);
  TemporaryFolder reference;
  const auto expected = load_document(reference, gpt2_document(vocabulary));
  const std::string text = "hello world, I'm h\xC3\xA9llo<|endoftext|>";
  for (const std::string& folder : {gpt2.path(), npm.path()}) {
    const auto tokenizer = load_tokenizer(folder);
    EXPECT_EQ(tokenizer->encode(text), expected->encode(text)) << folder;
    EXPECT_EQ(tokenizer->eos_id(), 1000);
    EXPECT_EQ(tokenizer->bos_id(), 1000);
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(text), true), "hello world, I'm h\xC3\xA9llo");
  }
  EXPECT_EQ(load_tokenizer(reference.path())->encode(text), expected->encode(text));  // a folder with tokenizer.json
}

TEST(TokenizerFilesTest, MergesAsPairsEqualMergesAsStrings) {
  json pairs = llama3();
  for (auto& merge : pairs["model"]["merges"]) {
    const std::string text = merge.get<std::string>();
    merge = json::array({text.substr(0, text.find(' ')), text.substr(text.find(' ') + 1)});
  }
  TemporaryFolder folder;
  const std::string sample = multilingual_sample();
  EXPECT_EQ(load_document(folder, pairs)->encode(sample),
            load_document(folder, llama3(), "strings.json")->encode(sample));
}

TEST(TokenizerFilesTest, TokenizerConfigNamesBosAndEos) {
  TemporaryFolder folder;
  folder.write("tokenizer_config.json",
               R"({"bos_token": {"content": "<|end_of_text|>", "lstrip": false}, "eos_token": "<|begin_of_text|>"})");
  const auto tokenizer = load_document(folder, llama3());
  EXPECT_EQ(tokenizer->bos_id(), 1001);
  EXPECT_EQ(tokenizer->eos_id(), 1000);
}

TEST(TokenizerFilesTest, PathsThatAreNoTokenizerListWhatIsAccepted) {
  EXPECT_EQ(error_text<DataError>([] { load_tokenizer("/no/such/tokenizer.json"); }),
            "tokenizer '/no/such/tokenizer.json' does not exist; fix: pass " + kAccepted);
  TemporaryFolder empty;
  empty.write("merges.txt", "a b\n");
  EXPECT_EQ(error_text<DataError>([&] { load_tokenizer(empty.path()); }),
            "tokenizer folder '" + empty.path() +
                "' holds no tokenizer.json, vocab.json + merges.txt, or encoder.json + vocab.bpe; fix: pass " +
                kAccepted);
  EXPECT_EQ(error_text<DataError>([] { load_tokenizer(""); }), "no tokenizer given; fix: pass " + kAccepted);
}

TEST(TokenizerFilesTest, FilesThatAreNotTokenizerJsonAreNamed) {
  TemporaryFolder folder;
  const std::string broken = folder.write("broken.json", "{\"model\": ");
  const std::string message = error_text<DataError>([&] { load_tokenizer(broken); });
  EXPECT_EQ(message.rfind("tokenizer file '" + broken + "' is not valid JSON (", 0), 0u) << message;
  EXPECT_NE(message.find("); fix: pass an intact tokenizer.json (or vocab.json) file"), std::string::npos) << message;
  EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
  EXPECT_EQ(load_error(json{{"a", 1}}),
            "'DIR/tokenizer.json' is not a tokenizer.json (it has no \"model\" field); fix: pass a tokenizer.json; for "
            "GPT-2's "
            "vocab.json + merges.txt (or encoder.json + vocab.bpe) pass their folder");
}

TEST(TokenizerFilesTest, UnsupportedModelsAndModelFieldsAreRefused) {
  json unigram = llama3();
  unigram["model"]["type"] = "Unigram";
  EXPECT_EQ(load_error(unigram),
            "'DIR/tokenizer.json' field model.type is \"Unigram\", but graphed supports only BPE models; fix: use a "
            "BPE tokenizer "
            "(GPT-2, Llama-2/3, Qwen2 style); WordPiece, WordLevel and Unigram are not supported");
  json dropout = llama3();
  dropout["model"]["dropout"] = 0.1;
  EXPECT_EQ(load_error(dropout),
            "'DIR/tokenizer.json' field model.dropout is 0.1, but BPE dropout (random merges) is for training; fix: "
            "set dropout to null");
  json bad_merge = llama3();
  bad_merge["model"]["merges"][0] = "abc";
  EXPECT_EQ(load_error(bad_merge),
            "'DIR/tokenizer.json' field model.merges[0] is \"abc\", not two tokens separated by one space; fix: repair "
            "the merges");
  json bad_id = llama3();
  bad_id["model"]["vocab"]["a"] = -3;
  EXPECT_EQ(load_error(bad_id),
            "'DIR/tokenizer.json' field model.vocab.a must be a token id (an integer from 0 to 2147483647), got -3; "
            "fix: repair the file");
  json missing_vocab = llama3();
  missing_vocab["model"].erase("vocab");
  EXPECT_EQ(load_error(missing_vocab),
            "'DIR/tokenizer.json' field model.vocab is missing; fix: add the field (see docs/tokenizers.md)");
  json unknown_merge = llama3();
  unknown_merge["model"]["merges"].push_back("zz q");
  EXPECT_EQ(load_error(unknown_merge)
                .rfind("'DIR/tokenizer.json' model: merge 16 \"zz q\": its left part is not in the vocabulary", 0),
            0u);
}

TEST(TokenizerFilesTest, UnknownSplitPatternsArePrintedWithTheSupportedOnes) {
  json document = llama3();
  document["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"(\s+|\w+)";
  EXPECT_EQ(load_error(document),
            "'DIR/tokenizer.json' field pre_tokenizer.pretokenizers[0].pattern.Regex is the pattern \"\\s+|\\w+\", "
            "which graphed does not know; fix: graphed matches only these patterns exactly, written as hand-made "
            "matchers: " +
                supported_split_patterns());
  EXPECT_NE(load_error(document).find("llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|"), std::string::npos);
  json removed = llama3();
  removed["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  EXPECT_EQ(load_error(removed),
            "'DIR/tokenizer.json' field pre_tokenizer.pretokenizers[0].behavior is \"Removed\", but graphed supports "
            "only \"Isolated\" splits; fix: use a tokenizer whose Split pre-tokenizer isolates its matches (GPT-2, "
            "Llama-3, Qwen2 do)");
}

TEST(TokenizerFilesTest, UnsupportedStagesNameTheirFieldAndType) {
  json pre_tokenizer = llama3();
  pre_tokenizer["pre_tokenizer"]["pretokenizers"][1] = json{{"type", "Whitespace"}};
  EXPECT_EQ(load_error(pre_tokenizer),
            "'DIR/tokenizer.json' field pre_tokenizer.pretokenizers[1].type is \"Whitespace\", a pre-tokenizer graphed "
            "does not support; "
            "fix: use a tokenizer whose pre-tokenizer is Split (a known pattern), ByteLevel, Metaspace, Sequence of "
            "these, or null "
            "(see docs/tokenizers.md)");
  json normalizer = llama3();
  normalizer["normalizer"] = json{{"type", "NFKC"}};
  EXPECT_EQ(load_error(normalizer),
            "'DIR/tokenizer.json' field normalizer.type is \"NFKC\", a normalizer graphed does not support; fix: use a "
            "tokenizer whose "
            "normalizer is NFC, Prepend, Replace (with a String pattern), Sequence of these, or null (see "
            "docs/tokenizers.md)");
  json decoder = llama3();
  decoder["decoder"] = json{{"type", "WordPiece"}, {"prefix", "##"}};
  EXPECT_EQ(load_error(decoder),
            "'DIR/tokenizer.json' field decoder.type is \"WordPiece\", a decoder graphed does not support; fix: use a "
            "tokenizer whose "
            "decoder is ByteLevel, Replace (String pattern), ByteFallback, Fuse, Strip, Metaspace, Sequence of these, "
            "or null (see "
            "docs/tokenizers.md)");
  json post_processor = llama3();
  post_processor["post_processor"] = json{{"type", "RobertaProcessing"}};
  EXPECT_EQ(load_error(post_processor),
            "'DIR/tokenizer.json' field post_processor.type is \"RobertaProcessing\", a post-processor graphed does "
            "not support; fix: "
            "use a tokenizer whose post-processor is TemplateProcessing, ByteLevel, Sequence of these, or null (see "
            "docs/tokenizers.md)");
  json regex_replace = llama2_document();
  regex_replace["normalizer"]["normalizers"][1]["pattern"] = json{{"Regex", " +"}};
  EXPECT_EQ(load_error(regex_replace),
            "'DIR/tokenizer.json' field normalizer.normalizers[1].pattern is {\"Regex\":\" +\"}, but graphed supports "
            "only {\"String\": "
            "...} patterns here; fix: use a tokenizer whose Replace normalizer has a String pattern (Regex "
            "replacements are not supported)");
  json template_token = llama3();
  template_token["post_processor"]["processors"][1]["single"][0]["SpecialToken"]["id"] = "<bos>";
  EXPECT_EQ(load_error(template_token),
            "'DIR/tokenizer.json' field post_processor.processors[1].single[0].SpecialToken.id names \"<bos>\", which "
            "special_tokens "
            "does not define; fix: add it to the post-processor's special_tokens");
}

TEST(TokenizerFilesTest, BadMergesFileLinesAreNamed) {
  TemporaryFolder folder;
  folder.write("vocab.json", ByteLevelVocabulary(word_merges()).vocab.dump());
  folder.write("merges.txt", "#version: 0.2\nh e\nhe  ll\n");
  EXPECT_EQ(error_text<DataError>([&] { load_tokenizer(folder.path()); }),
            "'" + folder.path() +
                "/merges.txt' line 3 is \"he  ll\", not two tokens separated by one space; fix: repair the merges");
}

}  // namespace
}  // namespace graphed::tokenizer
