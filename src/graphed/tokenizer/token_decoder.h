// tokenizer/token_decoder.h — TokenDecoder: the tokenizer.json "decoder" steps graphed supports, which
// turn the vocabulary entries of a list of ids back into text, as HF tokenizers' decode_chain does
// (each step maps the list of token strings to a new list, then the list is joined):
//   * ByteLevel: GPT-2's code points back to bytes, then UTF-8 with U+FFFD for invalid bytes;
//   * Replace (String pattern), ByteFallback (<0xXX> runs to bytes, "�" per byte when invalid), Fuse,
//     Strip, Metaspace: the Llama-2 family;
//   * a Sequence of these. Without a decoder the tokens are joined with spaces (HF's default).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace graphed::tokenizer {

namespace detail {
struct JsonPlace;
}

struct DecoderStep {
  enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  Kind kind = Kind::kByteLevel;
  std::string pattern;            ///< kReplace: the text to find; kMetaspace: the replacement ("▁")
  std::string content;            ///< kReplace: the replacement; kStrip: the character to strip
  std::size_t strip_start = 0;    ///< kStrip: at most this many leading `content` characters
  std::size_t strip_stop = 0;     ///< kStrip: at most this many trailing ones
  bool metaspace_prepend = true;  ///< kMetaspace: prepend_scheme is not "never" (drop it in the first token)
};

class TokenDecoder {
 public:
  TokenDecoder() = default;
  explicit TokenDecoder(std::vector<DecoderStep> steps) : steps_(std::move(steps)) {}

  /// Reads tokenizer.json's "decoder" value (null: no steps). Throws DataError naming the field.
  static TokenDecoder from_json(const nlohmann::json& value, const detail::JsonPlace& place);

  /// The text of the token strings (always valid UTF-8).
  std::string decode(std::vector<std::string> tokens) const;

  bool empty() const { return steps_.empty(); }
  /// "ByteLevel", "Replace + ByteFallback + Fuse + Strip", or "none".
  std::string describe() const;

 private:
  std::vector<DecoderStep> steps_;
};

}  // namespace graphed::tokenizer
