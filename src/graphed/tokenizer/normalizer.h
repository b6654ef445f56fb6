// tokenizer/normalizer.h — Normalizer: the tokenizer.json "normalizer" steps graphed supports, applied in
// order to each piece of text between added tokens: NFC (Qwen2), Prepend (Llama-2's "▁"), Replace
// with a String pattern (Llama-2's " " -> "▁"), and a Sequence of these. Anything else (NFKC,
// Lowercase, a Regex pattern, ...) is refused when the file is read.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace graphed::tokenizer {

namespace detail {
struct JsonPlace;
}

struct NormalizerStep {
  enum class Kind { kNfc, kPrepend, kReplace };
  Kind kind = Kind::kNfc;
  std::string pattern;  ///< kReplace: the text to find (never empty)
  std::string content;  ///< kPrepend: the prefix; kReplace: the replacement
};

class Normalizer {
 public:
  Normalizer() = default;
  explicit Normalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}

  /// Reads tokenizer.json's "normalizer" value (null: no steps). Throws DataError naming the field.
  static Normalizer from_json(const nlohmann::json& value, const detail::JsonPlace& place);

  /// The normalized text (valid UTF-8 in, valid UTF-8 out). Prepend adds nothing to empty text.
  std::string normalize(std::string_view text) const;

  bool empty() const { return steps_.empty(); }
  /// "NFC", "Prepend(▁) + Replace( ->▁)", or "none".
  std::string describe() const;

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace graphed::tokenizer
