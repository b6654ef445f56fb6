// tokenizer/pre_tokenizer.h — PreTokenizer: the tokenizer.json "pre_tokenizer" steps graphed supports,
// which cut a piece of normalized text into the words the BPE model encodes one by one:
//   * Split with one of the known patterns (tokenizer/split_pattern.h), behavior Isolated, not inverted;
//   * ByteLevel: optional prefix space, optional GPT-2 pattern split (use_regex), then every byte
//     mapped to GPT-2's printable code point (tokenizer/byte_level.h);
//   * Metaspace: spaces -> replacement ("▁"), prepend_scheme always/first/never, optional split
//     before each replacement;
//   * a Sequence of these, or null (the whole piece is one word).
// Anything else (Whitespace, Digits, BertPreTokenizer, other regexes) is refused when read.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "graphed/tokenizer/split_pattern.h"

namespace graphed::tokenizer {

namespace detail {
struct JsonPlace;
}

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  enum class PrependScheme { kAlways, kFirst, kNever };
  Kind kind = Kind::kSplit;
  SplitPattern pattern = SplitPattern::kGpt2;             ///< kSplit
  bool add_prefix_space = false;                          ///< kByteLevel: prepend " " unless the piece starts with one
  bool use_regex = true;                                  ///< kByteLevel: split with the GPT-2 pattern first
  std::string replacement = "\xE2\x96\x81";               ///< kMetaspace: "▁" (U+2581)
  PrependScheme prepend_scheme = PrependScheme::kAlways;  ///< kMetaspace
  bool split = true;                                      ///< kMetaspace: split before each replacement
};

/// A word for the model, and whether it starts where the whole input text starts (Metaspace's
/// prepend_scheme "first" prepends only there).
struct PreToken {
  std::string text;
  bool at_text_start = false;
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}

  /// Reads tokenizer.json's "pre_tokenizer" value (null: no steps). Throws DataError naming the field
  /// and, for an unknown Split pattern, printing it and listing the supported ones.
  static PreTokenizer from_json(const nlohmann::json& value, const detail::JsonPlace& place);

  /// The words of one piece of normalized text (empty words are dropped).
  std::vector<PreToken> pre_tokenize(std::string_view text, bool at_text_start) const;

  const std::vector<PreTokenizerStep>& steps() const { return steps_; }
  /// "Split(llama3) + ByteLevel", or "none".
  std::string describe() const;

 private:
  std::vector<PreTokenizerStep> steps_;
};

}  // namespace graphed::tokenizer
