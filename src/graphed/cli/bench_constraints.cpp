// cli/bench_constraints.cpp — see cli/bench_constraints.h.
#include "graphed/cli/bench_constraints.h"

#include <cstring>
#include <random>
#include <vector>

#include "graphed/grammar/json_schema.h"
#include "graphed/serve/structured_output.h"
#include "graphed/serve/vocabulary_table.h"
#include "graphed/util/error.h"
#include "graphed/util/file_system.h"

namespace graphed::cli {
namespace {

/// A seeded vocabulary of `size` ids: the 256 bytes, then words (half with a leading space), numbers, and the
/// pieces of JSON punctuation byte-level tokenizers learn.
std::shared_ptr<const serve::VocabularyTable> synthetic_vocabulary(int64_t size) {
  static const char* const kPunctuation[] = {"\":",  "\",", "{\"", "\"}",   "[\"",  "\"]",  "\":\"", "},{\"", "\":[",
                                             "\":{", "}]",  "]}",  "\",\"", "null", "true", "false", "\\n",   ", "};
  std::mt19937_64 random(45);
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_int_distribution<int> length(2, 9);
  std::uniform_int_distribution<int> letter('a', 'z');
  std::uniform_int_distribution<int> digit('0', '9');
  std::uniform_int_distribution<std::size_t> punctuation(0, std::size(kPunctuation) - 1);
  std::vector<std::string> bytes;
  for (int byte = 0; byte < 256 && static_cast<int64_t>(bytes.size()) < size; ++byte) {
    bytes.emplace_back(1, static_cast<char>(byte));
  }
  while (static_cast<int64_t>(bytes.size()) < size) {
    const int choice = kind(random);
    std::string token;
    if (choice < 7) {
      if (choice % 2 == 0) token += ' ';
      for (int i = length(random); i > 0; --i) token += static_cast<char>(letter(random));
    } else if (choice < 9) {
      for (int i = length(random) / 2; i > 0; --i) token += static_cast<char>(digit(random));
    } else {
      token = kPunctuation[punctuation(random)];
    }
    bytes.push_back(std::move(token));
  }
  std::vector<bool> usable(bytes.size(), true);
  return std::make_shared<serve::VocabularyTable>(bytes, bytes, usable);
}

/// One request's schema, document after document: a complete one is followed by a fresh start, so the request
/// draws its whole output length (a benchmark has no end token).
class RepeatingDocuments final : public infer::TokenConstraint {
 public:
  using Factory = std::function<std::unique_ptr<infer::TokenConstraint>()>;
  explicit RepeatingDocuments(Factory factory) : factory_(std::move(factory)), current_(factory_()) {}
  void allowed(std::uint32_t* words, std::int64_t word_count) override { current_->allowed(words, word_count); }
  void accept(std::int64_t token) override {
    current_->accept(token);
    if (current_->finished()) current_ = factory_();
  }
  bool finished() const override { return false; }

 private:
  Factory factory_;
  std::unique_ptr<infer::TokenConstraint> current_;
};

}  // namespace

RequestDecoration bench_decoration(int64_t logprobs, const std::string& schema_file, int64_t vocabulary) {
  GRAPHED_CHECK(logprobs >= -1 && logprobs <= infer::kMaxTopLogprobs, ConfigError, "--logprobs is ", logprobs,
                "; fix: give 0 to ", infer::kMaxTopLogprobs, " likeliest tokens per drawn token");
  if (schema_file.empty()) {
    return [logprobs](infer::RequestOptions& options) { options.logprobs = logprobs; };
  }
  std::string text;
  if (const int error = read_file(schema_file, text)) {
    throw ConfigError("--json-schema " + schema_file + " cannot be read (" + std::strerror(error) +
                      "); fix: give a file holding one JSON schema");
  }
  std::shared_ptr<serve::CompiledGrammar> compiled;
  try {
    compiled = std::make_shared<serve::CompiledGrammar>(grammar::compile_json_schema_text(text), "json_schema");
  } catch (const grammar::SchemaError& error) {
    throw ConfigError("--json-schema " + schema_file + ": " + error.what());
  }
  const auto table = synthetic_vocabulary(vocabulary);
  const auto trie = std::make_shared<const grammar::TokenTrie>(table->grammar_bytes());
  return [=](infer::RequestOptions& options) {
    options.logprobs = logprobs;
    options.constraint = std::make_shared<RepeatingDocuments>(
        [=] { return std::make_unique<serve::GrammarConstraint>(compiled, table, trie, std::vector<int64_t>{}); });
  };
}

std::string decoration_text(int64_t logprobs, const std::string& schema_file) {
  std::string text;
  if (logprobs >= 0) text += "log probabilities with the " + std::to_string(logprobs) + " likeliest tokens";
  if (!schema_file.empty()) {
    if (!text.empty()) text += "; ";
    text += "output following the JSON schema in " + schema_file + " (a synthetic vocabulary)";
  }
  return text;
}

}  // namespace graphed::cli
